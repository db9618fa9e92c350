"""Kafka's JaasConfig: the ``sasl.jaas.config`` property's JAAS text, parsed.

The value holds login module entries in the JAAS configuration file syntax::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

each entry a login module class, a control flag (required, requisite,
sufficient, optional) and ``key=value`` options, ended by a semicolon. Values
are quoted strings (a backslash escapes the next character) or bare words.
Brokers and clients share this parser, as Kafka's common package does; its
errors never quote an option's value, which may be a password.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_SPECIAL = "=;\""


class JaasConfigError(ValueError):
    """Kafka's IllegalArgumentException for a bad sasl.jaas.config (no secret in the message)."""


@dataclass(frozen=True, slots=True)
class LoginModuleEntry:
    """One JAAS login module entry (Java's AppConfigurationEntry)."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options may hold passwords: only their names are shown
        return f"LoginModuleEntry({self.login_module!r}, {self.control_flag!r}, keys={sorted(self.options)})"


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``word``, ``quoted``, or a special character as its own kind."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char.isspace():
            i += 1
        elif text.startswith("//", i):  # a comment to the line's end, as Java's tokenizer allows
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif char == '"':
            i = _quoted(text, i + 1, tokens)
        elif char in "=;":
            tokens.append((char, char))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            tokens.append(("word", text[start:i]))
    return tokens


def _quoted(text: str, i: int, tokens: list[tuple[str, str]]) -> int:
    value: list[str] = []
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            value.append(text[i + 1])
            i += 2
        elif char == '"':
            tokens.append(("quoted", "".join(value)))
            return i + 1
        else:
            value.append(char)
            i += 1
    raise JaasConfigError("Invalid JAAS config: unterminated quoted value")


def parse_jaas_config(text: str) -> list[LoginModuleEntry]:
    """Every login module entry of ``text``; JaasConfigError when it is not valid JAAS."""
    tokens = _tokens(text)
    entries: list[LoginModuleEntry] = []
    pos = 0
    while pos < len(tokens):
        entry, pos = _entry(tokens, pos)
        entries.append(entry)
    if not entries:
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    return entries


def _entry(tokens: list[tuple[str, str]], pos: int) -> tuple[LoginModuleEntry, int]:
    kind, module = tokens[pos]
    if kind != "word":
        raise JaasConfigError("Invalid JAAS config: login module class name expected")
    if pos + 1 >= len(tokens) or tokens[pos + 1][0] != "word":
        raise JaasConfigError("Login module control flag not specified in JAAS config")
    flag = tokens[pos + 1][1].lower()
    if flag not in CONTROL_FLAGS:
        raise JaasConfigError(f"Invalid login module control flag '{tokens[pos + 1][1]}' in JAAS config")
    pos += 2
    options: dict[str, str] = {}
    while pos < len(tokens) and tokens[pos][0] != ";":
        kind, key = tokens[pos]
        if kind != "word":
            raise JaasConfigError("Invalid JAAS config: option name expected")
        if pos + 2 >= len(tokens) or tokens[pos + 1][0] != "=" or tokens[pos + 2][0] not in ("word", "quoted"):
            raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
        options[key] = tokens[pos + 2][1]
        pos += 3
    if pos >= len(tokens):
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    return LoginModuleEntry(module, flag, options), pos + 1


def single_login_module(text: str, config_name: str = "sasl.jaas.config") -> LoginModuleEntry:
    """The one entry Kafka requires of a ``sasl.jaas.config`` property."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(f"JAAS config property contains {len(entries)} login modules, should be 1 module "
                              f"({config_name})")
    return entries[0]
