"""A client's ``security.protocol`` and what it needs: Kafka's client properties, as the tools'
``--command-config`` file gives them.

- ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
- TLS (SSL, SASL_SSL) from Kafka's PEM settings: ``ssl.truststore.location`` (a PEM file) or
  ``ssl.truststore.certificates`` (PEM text) to trust, ``ssl.keystore.location`` (key and
  certificate in one PEM file, ``ssl.key.password`` if the key is encrypted) for a client
  certificate, ``ssl.endpoint.identification.algorithm`` (``https``, Kafka's default, checks the
  broker's host name; empty does not).
- SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.mechanism`` and ``sasl.jaas.config`` (``client.sasl``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from client.sasl import SaslSettings

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """ValueError (naming the property, never a secret) for an unusable setting."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}")
        context = _ssl_context(props) if protocol in ("SSL", "SASL_SSL") else None
        return cls(context, SaslSettings.from_client_properties({**props, "security.protocol": protocol}))


def _ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    location = props.get("ssl.truststore.location")
    certificates = props.get("ssl.truststore.certificates")
    if location or certificates:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cafile=location or None, cadata=certificates or None)
    if props.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
        context.check_hostname = False  # Kafka's way to skip the host name check
    keystore = props.get("ssl.keystore.location")
    if keystore:
        context.load_cert_chain(keystore, password=props.get("ssl.key.password") or None)
    return context
