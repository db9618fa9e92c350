"""Kafka's SslFactory for Python's ``ssl``: an SSLContext from a listener's ``ssl.*`` settings.

Stores are PEM (KIP-651), as files or as PEM text in the configuration:

* the key store (``ssl.keystore.type=PEM``): ``ssl.keystore.location``, one file
  with the private key and the certificate chain, or ``ssl.keystore.key`` plus
  ``ssl.keystore.certificate.chain``; an encrypted key is opened with
  ``ssl.key.password``. Python loads keys from files only, so PEM text is
  written to a private temporary file (mode 0600, in a 0700 directory) for the
  moment it is loaded, and removed at once;
* the trust store (``ssl.truststore.type=PEM``): ``ssl.truststore.location`` or
  ``ssl.truststore.certificates``; without one, the system's CAs are trusted, as
  a JVM trusts its default cacerts.

Kafka's checks of these settings are kept with Kafka's wording (a store
password given with PEM, a key without a chain...). Versions:
``ssl.enabled.protocols`` is the range of TLS versions allowed (Python's ``ssl``
sets a minimum and a maximum, so the list must be contiguous); a client's
``ssl.protocol`` caps the highest version it offers, as Kafka documents.
``ssl.cipher.suites`` takes IANA names (Kafka's) or OpenSSL names; TLSv1.3's
suites cannot be narrowed through Python's ``ssl``, so a list naming some of them
must name all that OpenSSL enables.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from broker.config.ssl_config import SslConfig

PEM = "PEM"
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_VERSION_ORDER = list(_VERSIONS.values())
#: ssl.protocol names that Python can honour ("TLS": whatever the enabled protocols allow).
_CONTEXT_PROTOCOLS = ("TLS", *_VERSIONS)
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})
#: IANA key exchange / bulk cipher parts of TLSv1.2 AEAD suites, as OpenSSL spells them.
_IANA_KEY_EXCHANGE = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}
_IANA_BULK = {"AES_128_GCM_SHA256": "AES128-GCM-SHA256", "AES_256_GCM_SHA384": "AES256-GCM-SHA384",
              "CHACHA20_POLY1305_SHA256": "CHACHA20-POLY1305"}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


class SslConfigError(ValueError):
    """Kafka's InvalidConfigurationException for SSL settings (never quotes a secret)."""


def server_context(config: SslConfig, client_auth: str | None = None) -> ssl.SSLContext:
    """A listener's context: its key store is required; clients are verified against the trust
    store as ``client_auth`` (default ``ssl.client.auth``) asks."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(context, config, client=False)
    _set_cipher_suites(context, config.ssl_cipher_suites)
    if not _load_keystore(context, config):
        raise SslConfigError("An SSL listener needs a key store: set ssl.keystore.type=PEM and ssl.keystore.location, "
                             "or ssl.keystore.certificate.chain and ssl.keystore.key")
    context.verify_mode = _CLIENT_AUTH[client_auth or config.ssl_client_auth]
    if context.verify_mode != ssl.CERT_NONE and not _load_truststore(context, config):
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(config: SslConfig) -> ssl.SSLContext:
    """A client's context (a broker reaching another over TLS): the server is verified against the
    trust store, its host name too unless ``ssl.endpoint.identification.algorithm`` is empty; the
    key store, if any, is the client's certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = config.ssl_endpoint_identification_algorithm.strip().lower()
    if algorithm not in ("https", ""):
        raise SslConfigError(f"Unsupported ssl.endpoint.identification.algorithm {algorithm!r}: https or empty")
    context.check_hostname = algorithm == "https"
    _set_versions(context, config, client=True)
    _set_cipher_suites(context, config.ssl_cipher_suites)
    _load_keystore(context, config)
    if not _load_truststore(context, config):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return context


# -- versions and cipher suites -------------------------------------------------------------
def _set_versions(context: ssl.SSLContext, config: SslConfig, client: bool) -> None:
    unknown = [p for p in config.ssl_enabled_protocols if p not in _VERSIONS]
    if unknown or not config.ssl_enabled_protocols:
        raise SslConfigError(f"ssl.enabled.protocols {config.ssl_enabled_protocols}: supported are "
                             f"{', '.join(_VERSIONS)}")
    if config.ssl_protocol not in _CONTEXT_PROTOCOLS:
        raise SslConfigError(f"ssl.protocol {config.ssl_protocol}: supported are {', '.join(_CONTEXT_PROTOCOLS)}")
    positions = sorted({_VERSION_ORDER.index(_VERSIONS[p]) for p in config.ssl_enabled_protocols})
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise SslConfigError(f"ssl.enabled.protocols {config.ssl_enabled_protocols}: Python's ssl enables a "
                             "contiguous range of TLS versions")
    highest = positions[-1]
    if client and config.ssl_protocol in _VERSIONS:
        highest = min(highest, _VERSION_ORDER.index(_VERSIONS[config.ssl_protocol]))
        if highest < positions[0]:
            raise SslConfigError(f"ssl.protocol {config.ssl_protocol} is below every one of ssl.enabled.protocols")
    context.minimum_version = _VERSION_ORDER[positions[0]]
    context.maximum_version = _VERSION_ORDER[highest]


def openssl_cipher_name(name: str) -> str:
    """An IANA TLSv1.2 AEAD suite name (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``) as OpenSSL
    names it (``ECDHE-RSA-AES128-GCM-SHA256``); any other name as it is."""
    key_exchange, sep, bulk = name.removeprefix("TLS_").partition("_WITH_")
    if sep and key_exchange in _IANA_KEY_EXCHANGE and bulk in _IANA_BULK:
        return _IANA_KEY_EXCHANGE[key_exchange] + _IANA_BULK[bulk]
    return name


def _set_cipher_suites(context: ssl.SSLContext, suites: list[str]) -> None:
    if not suites:
        return
    tls13 = {s for s in suites if s in _TLS13_SUITES}
    enabled13 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.3"}
    if tls13 and tls13 != enabled13:
        raise SslConfigError(f"ssl.cipher.suites: TLSv1.3 suites cannot be narrowed with Python's ssl; name all of "
                             f"{', '.join(sorted(enabled13))} or none")
    names = [openssl_cipher_name(s) for s in suites if s not in _TLS13_SUITES]
    for name in names:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(name)
        except ssl.SSLError:
            raise SslConfigError(f"ssl.cipher.suites: unsupported cipher suite {name}") from None
    if names:
        context.set_ciphers(":".join(names))
    else:  # only TLSv1.3 suites: no TLSv1.2 handshake could agree on one (as in Kafka)
        context.minimum_version = ssl.TLSVersion.TLSv1_3


# -- stores ------------------------------------------------------------------------------
def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def _load_keystore(context: ssl.SSLContext, config: SslConfig) -> bool:
    """Load the key store if one is configured (Kafka's checks first); False if none is."""
    location, key, chain = config.ssl_keystore_location, config.ssl_keystore_key, config.ssl_keystore_certificate_chain
    if key is not None:
        if config.ssl_keystore_type != PEM:
            raise SslConfigError(f"SSL private key can be specified only for PEM, but key store type is "
                                 f"{config.ssl_keystore_type}.")
        if location is not None:
            raise SslConfigError("Both SSL key store location and separate private key are specified.")
        if chain is None:
            raise SslConfigError("SSL private key is specified, but certificate chain is not specified.")
    elif chain is not None:
        raise SslConfigError("SSL certificate chain is specified, but private key is not specified")
    if location is None and key is None:
        return False
    if config.ssl_keystore_type != PEM:
        raise SslConfigError(f"ssl.keystore.type {config.ssl_keystore_type}: pafka reads PEM key stores only "
                             "(ssl.keystore.type=PEM)")
    if config.ssl_keystore_password is not None:
        raise SslConfigError("SSL key store password cannot be specified with PEM format, only key password may be "
                             "specified")
    password = _secret(config.ssl_key_password)
    try:
        if location is not None:
            _load_cert_chain(context, location, password)
        else:
            _load_pem_text(context, _pem(_secret(chain) or "") + _pem(_secret(key) or ""), password)
    except (ssl.SSLError, OSError) as exc:
        where = location or "ssl.keystore.key / ssl.keystore.certificate.chain"
        raise SslConfigError(f"cannot load the PEM key store {where}: {_reason(exc)}") from None
    return True


def _load_cert_chain(context: ssl.SSLContext, path: str, password: str | None) -> None:
    # Without a password callback OpenSSL would prompt on the terminal for an encrypted key.
    context.load_cert_chain(path, password=password if password is not None else _no_password)


def _no_password() -> str:
    return ""


def _load_pem_text(context: ssl.SSLContext, pem: str, password: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="pafka-keystore-") as directory:
        path = Path(directory) / "keystore.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(pem)
        _load_cert_chain(context, str(path), password)


def _load_truststore(context: ssl.SSLContext, config: SslConfig) -> bool:
    location, certificates = config.ssl_truststore_location, config.ssl_truststore_certificates
    if location is None and certificates is None:
        return False
    if config.ssl_truststore_type != PEM:
        raise SslConfigError(f"ssl.truststore.type {config.ssl_truststore_type}: pafka reads PEM trust stores "
                             "only (ssl.truststore.type=PEM)")
    if config.ssl_truststore_password is not None:
        raise SslConfigError("SSL trust store password cannot be specified for PEM format.")
    if location is not None and certificates is not None:
        raise SslConfigError("Both SSL trust store location and separate trust certificates are specified.")
    load: Callable[[], None] = (
        (lambda: context.load_verify_locations(cafile=location)) if location is not None
        else (lambda: context.load_verify_locations(cadata=_pem(_secret(certificates) or ""))))
    try:
        load()
    except (ssl.SSLError, OSError) as exc:
        raise SslConfigError(f"cannot load the PEM trust store {location or 'ssl.truststore.certificates'}: "
                             f"{_reason(exc)}") from None
    return True


def _reason(exc: OSError) -> str:
    return str(exc.strerror or getattr(exc, "reason", None) or exc)


def _pem(text: str) -> str:
    """PEM blocks rewrapped: a properties file joins a value's continued lines without their line
    breaks (``-----BEGIN CERTIFICATE----- MIIC... \\``), which Kafka accepts and OpenSSL would not."""
    blocks = _PEM_BLOCK.findall(text)
    if not blocks:
        raise SslConfigError("no PEM block (-----BEGIN ...-----) found")
    out = []
    for label, body in blocks:
        data = "".join(body.split())
        lines = [data[i:i + 64] for i in range(0, len(data), 64)]
        out.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]) + "\n")
    return "".join(out)
