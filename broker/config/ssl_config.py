"""The ``ssl.*`` broker properties, under Kafka's names and defaults, and their per-listener form.

Kafka reads a listener's SSL settings with the listener's prefix winning key by
key (``listener.name.<lower-case listener name>.ssl.keystore.location`` over
``ssl.keystore.location``): :func:`listener_ssl_config` resolves one listener's
:class:`SslConfig` that way. Stores are read in Kafka's PEM form (KIP-651):
``ssl.keystore.type=PEM`` with a file (``ssl.keystore.location``) or the PEM
text itself (``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``), and
likewise for the truststore. Kafka's PASSWORD configs are ``SecretStr`` here, so
a config printed or logged by accident shows no secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator

#: Kafka's listener prefix for per-listener configs (the listener name lower-cased).
LISTENER_PREFIX = "listener.name.{}."
CLIENT_AUTH_VALUES = ("none", "requested", "required")


def _prop(default: Any, name: str) -> Any:
    return Field(default, validation_alias=AliasChoices(name), serialization_alias=name)


def _split_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class SslConfig(BaseModel):
    """Kafka's SslConfigs and BrokerSecurityConfigs that the TLS listeners and clients use."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    ssl_keystore_type: str = _prop("JKS", "ssl.keystore.type")
    ssl_keystore_location: str | None = _prop(None, "ssl.keystore.location")
    ssl_keystore_password: SecretStr | None = _prop(None, "ssl.keystore.password")
    ssl_key_password: SecretStr | None = _prop(None, "ssl.key.password")
    ssl_keystore_certificate_chain: SecretStr | None = _prop(None, "ssl.keystore.certificate.chain")
    ssl_keystore_key: SecretStr | None = _prop(None, "ssl.keystore.key")
    ssl_truststore_type: str = _prop("JKS", "ssl.truststore.type")
    ssl_truststore_location: str | None = _prop(None, "ssl.truststore.location")
    ssl_truststore_password: SecretStr | None = _prop(None, "ssl.truststore.password")
    ssl_truststore_certificates: SecretStr | None = _prop(None, "ssl.truststore.certificates")
    ssl_client_auth: str = _prop("none", "ssl.client.auth")
    ssl_protocol: str = _prop("TLSv1.3", "ssl.protocol")
    ssl_enabled_protocols: list[str] = _prop(["TLSv1.2", "TLSv1.3"], "ssl.enabled.protocols")
    ssl_cipher_suites: list[str] = _prop([], "ssl.cipher.suites")
    ssl_endpoint_identification_algorithm: str = _prop("https", "ssl.endpoint.identification.algorithm")
    ssl_principal_mapping_rules: str = _prop("DEFAULT", "ssl.principal.mapping.rules")

    @field_validator("ssl_enabled_protocols", "ssl_cipher_suites", mode="before")
    @classmethod
    def _parse_ssl_list(cls, value: Any) -> Any:  # not _parse_list: BrokerConfig's would replace it
        return _split_list(value)

    @field_validator("ssl_client_auth")
    @classmethod
    def _check_ssl_client_auth(cls, value: str) -> str:
        if value.lower() not in CLIENT_AUTH_VALUES:
            raise ValueError(f"String must be one of: {', '.join(CLIENT_AUTH_VALUES)}")
        return value.lower()

    @field_validator("ssl_keystore_type", "ssl_truststore_type")
    @classmethod
    def _upper_store_type(cls, value: str) -> str:
        return value.upper()


#: Property name -> field name, for every SSL property.
SSL_FIELDS: dict[str, str] = {str(info.serialization_alias): name for name, info in SslConfig.model_fields.items()}


def listener_ssl_config(base: SslConfig, extra: Mapping[str, Any], listener_name: str) -> SslConfig:
    """``listener_name``'s SSL settings: its ``listener.name.<listener>.ssl.*`` properties (from
    ``extra``, the broker's properties without a field of their own) over ``base``, key by key."""
    prefix = LISTENER_PREFIX.format(listener_name.lower())
    overrides = {name[len(prefix):]: value for name, value in extra.items()
                 if name.startswith(prefix) and name[len(prefix):] in SSL_FIELDS}
    if not overrides:
        return base
    values: dict[str, Any] = {prop: getattr(base, field) for prop, field in SSL_FIELDS.items()}
    values.update(overrides)
    return SslConfig.model_validate(values)
