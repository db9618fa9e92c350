"""Kafka's ChannelBuilders: what a listener's security protocol asks of its connections.

A listener mapped (``listener.security.protocol.map``) to SSL or SASL_SSL serves
TLS with a context from its own ``ssl.*`` settings (the listener prefix
winning); PLAINTEXT and SASL_PLAINTEXT ones serve plain TCP. The broker's own
connections to other brokers use the inter-broker listener's protocol and
settings, as Kafka's inter-broker clients do.

Kafka's DefaultKafkaPrincipalBuilder gives a TLS client that presented a
certificate the principal ``User:<name>``, the name mapped from the
certificate's RFC 2253 subject by ``ssl.principal.mapping.rules``; every other
client is ``User:ANONYMOUS``. A SASL_PLAINTEXT or SASL_SSL listener's clients
authenticate first (``broker.security.sasl_authenticator``) and are
``User:<the name they authenticated as>``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from broker.config.broker_config import BrokerConfig
from broker.config.sasl_config import SASL_PROTOCOLS, SaslListenerConfig, jaas_property, listener_sasl_config
from broker.config.ssl_config import LISTENER_PREFIX
from broker.security.distinguished_name import rfc2253_name
from broker.security.kafka_principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from broker.security.ssl_factory import client_context, server_context
from broker.security.ssl_principal_mapper import SslPrincipalMapper
from client.sasl import SaslSettings

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """How one listener's connections are served and who their clients are."""

    security_protocol: str
    #: None: plain TCP.
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: SslPrincipalMapper | None = None
    #: None: no SASL authentication (PLAINTEXT, SSL).
    sasl: SaslListenerConfig | None = None

    def principal(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """The principal of a connection, from its client's certificate if it sent one.

        Raises ValueError (the client is not authenticated) when no mapping rule applies to
        the certificate's subject, as Kafka fails such a client's authentication."""
        if ssl_object is None or self.principal_mapper is None:
            return ANONYMOUS
        certificate = ssl_object.getpeercert(binary_form=True)
        if not certificate:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.principal_mapper.get_name(rfc2253_name(certificate)))


def listener_security(config: BrokerConfig, listener_name: str) -> ListenerSecurity:
    """Kafka's serverChannelBuilder for one listener; SslConfigError/ValueError for bad settings."""
    protocol = config.security_protocol_of(listener_name)
    sasl = (listener_sasl_config(config.sasl_enabled_mechanisms, config.model_extra or {}, listener_name,
                                 config.connections_max_reauth_ms)
            if protocol in SASL_PROTOCOLS else None)
    if protocol not in TLS_PROTOCOLS:
        return ListenerSecurity(protocol, sasl=sasl)
    ssl_config = config.ssl_config_for(listener_name)
    client_auth = ssl_config.ssl_client_auth
    prefixed_client_auth = LISTENER_PREFIX.format(listener_name.lower()) + "ssl.client.auth"
    if protocol == "SASL_SSL" and prefixed_client_auth not in (config.model_extra or {}):
        # Kafka applies ssl.client.auth to a SASL_SSL listener only when set with its prefix.
        client_auth = "none"
    return ListenerSecurity(protocol, server_context(ssl_config, client_auth),
                            SslPrincipalMapper.from_rules(ssl_config.ssl_principal_mapping_rules), sasl)


def inter_broker_ssl_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The context of this broker's connections to other brokers (replication, the controller's
    requests, coordinators'); None when the inter-broker listener is not a TLS one."""
    listener = config.inter_broker_listener
    if config.security_protocol_of(listener) not in TLS_PROTOCOLS:
        return None
    return client_context(config.ssl_config_for(listener))


def inter_broker_sasl(config: BrokerConfig) -> SaslSettings | None:
    """The broker's own SASL credentials on other brokers: sasl.mechanism.inter.broker.protocol with the
    ``username``/``password`` of that mechanism's JAAS entry on the inter-broker listener; None when that
    listener is not a SASL one. ValueError (no secret in it) when the mechanism is not served there or
    its JAAS entry names no credentials, as Kafka refuses to start."""
    listener = config.inter_broker_listener
    if config.security_protocol_of(listener) not in SASL_PROTOCOLS:
        return None
    mechanism = config.sasl_mechanism_inter_broker_protocol
    sasl = listener_sasl_config(config.sasl_enabled_mechanisms, config.model_extra or {}, listener)
    if mechanism not in sasl.mechanisms:
        raise ValueError(f"sasl.mechanism.inter.broker.protocol {mechanism} must be included in "
                         f"sasl.enabled.mechanisms of listener {listener} and served by pafka")
    credentials = sasl.credentials_of_broker(mechanism)
    if credentials is None:
        raise ValueError(f"{jaas_property(listener, mechanism)} must give the broker's username and password")
    return SaslSettings(mechanism, *credentials)
