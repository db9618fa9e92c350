"""A SASL listener's settings under Kafka's names and its rules for the listener prefix.

- ``sasl.enabled.mechanisms`` (Kafka's default GSSAPI), overridden per listener
  by ``listener.name.<listener>.sasl.enabled.mechanisms``. pafka serves PLAIN,
  SCRAM-SHA-256 and SCRAM-SHA-512; an enabled mechanism it does not serve is
  never offered to clients (a handshake for it gets UNSUPPORTED_SASL_MECHANISM).
- The JAAS config of a mechanism on a listener:
  ``listener.name.<listener>.<mechanism lower-cased>.sasl.jaas.config``. As in
  Kafka (JaasContext.loadServerContext), a broker ignores a bare
  ``sasl.jaas.config`` with a warning: it names no mechanism. A PLAIN listener
  takes its users from the PlainLoginModule's ``user_<name>="<password>"``
  options; the ``username``/``password`` options are the broker's own
  credentials when the listener is the inter-broker one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from client.jaas_config import LoginModuleEntry, single_login_module

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
#: The mechanisms pafka serves, in the order Kafka's docs list them.
SERVED_MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512")
KNOWN_MECHANISMS = ("GSSAPI", "OAUTHBEARER", *SERVED_MECHANISMS)
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
JAAS_CONFIG = "sasl.jaas.config"
MAX_REAUTH = "connections.max.reauth.ms"
ENABLED_MECHANISMS = "sasl.enabled.mechanisms"
_PLAIN_USER_PREFIX = "user_"


def is_listener_sasl_property(name: str) -> bool:
    """``<config>`` of ``listener.name.<l>.<config>`` that a SASL listener reads."""
    if name == ENABLED_MECHANISMS:
        return True
    mechanism, _, rest = name.partition(".")
    return rest in (JAAS_CONFIG, MAX_REAUTH) and mechanism.upper() in KNOWN_MECHANISMS


def jaas_property(listener_name: str, mechanism: str) -> str:
    return f"listener.name.{listener_name.lower()}.{mechanism.lower()}.{JAAS_CONFIG}"


@dataclass(frozen=True, slots=True)
class SaslListenerConfig:
    """What a SASL listener offers: its served mechanisms and PLAIN's users (never shown)."""

    listener_name: str
    #: Enabled and served, in sasl.enabled.mechanisms' order.
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: mechanism -> its JAAS entry on this listener.
    login_modules: Mapping[str, LoginModuleEntry] = field(default_factory=dict, repr=False)
    #: mechanism -> connections.max.reauth.ms on this listener (0 or absent: sessions never expire).
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)

    def credentials_of_broker(self, mechanism: str) -> tuple[str, str] | None:
        """(username, password) of the JAAS entry for ``mechanism``: the broker's own, inter-broker."""
        entry = self.login_modules.get(mechanism)
        if entry is None or "username" not in entry.options or "password" not in entry.options:
            return None
        return entry.options["username"], entry.options["password"]


def enabled_mechanisms(default: list[str], extra: Mapping[str, Any], listener_name: str) -> list[str]:
    """``sasl.enabled.mechanisms`` of one listener, the listener prefix winning."""
    prefixed = extra.get(f"listener.name.{listener_name.lower()}.{ENABLED_MECHANISMS}")
    if prefixed is None:
        return list(default)
    return [item.strip() for item in str(prefixed).split(",") if item.strip()]


def listener_sasl_config(default_mechanisms: list[str], extra: Mapping[str, Any],
                         listener_name: str, default_max_reauth_ms: int = 0) -> SaslListenerConfig:
    """One SASL listener's settings; ValueError (no secret in it) for a missing or bad JAAS config."""
    enabled = enabled_mechanisms(default_mechanisms, extra, listener_name)
    unserved = [m for m in enabled if m not in SERVED_MECHANISMS]
    if unserved:
        log.warning("SASL mechanisms %s enabled on listener %s are not supported by pafka; not offered",
                    ",".join(unserved), listener_name)
    if JAAS_CONFIG in extra:
        log.warning("Server config %s should be prefixed with SASL mechanism name, ignoring config", JAAS_CONFIG)
    served = tuple(m for m in enabled if m in SERVED_MECHANISMS)
    modules: dict[str, LoginModuleEntry] = {}
    for mechanism in served:
        text = extra.get(jaas_property(listener_name, mechanism))
        if text is not None:
            modules[mechanism] = single_login_module(str(text), jaas_property(listener_name, mechanism))
    users: dict[str, str] = {}
    if PLAIN in served:
        if PLAIN not in modules:
            raise ValueError(f"listener {listener_name} enables PLAIN without a PlainLoginModule in "
                             f"{jaas_property(listener_name, PLAIN)}")
        users = {key[len(_PLAIN_USER_PREFIX):]: value for key, value in modules[PLAIN].options.items()
                 if key.startswith(_PLAIN_USER_PREFIX)}
    max_reauth = {mechanism: _max_reauth_ms(extra, listener_name, mechanism, default_max_reauth_ms)
                  for mechanism in served}
    return SaslListenerConfig(listener_name, served, users, modules, max_reauth)


def _max_reauth_ms(extra: Mapping[str, Any], listener_name: str, mechanism: str, default: int) -> int:
    """connections.max.reauth.ms of one mechanism on one listener, its prefixed form winning."""
    value = extra.get(f"listener.name.{listener_name.lower()}.{mechanism.lower()}.{MAX_REAUTH}", default)
    try:
        parsed = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"Invalid value {value} for configuration {MAX_REAUTH}: Not a number of type LONG") from None
    if parsed < 0:
        raise ValueError(f"Invalid value {parsed} for configuration {MAX_REAUTH}: must be 0 or more")
    return parsed
