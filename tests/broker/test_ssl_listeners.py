"""TLS listeners in process: Kafka's PEM settings, the listener prefix, and each connection's principal.

The real clients' side (confluent-kafka, kafka-python, aiokafka against a broker process) is in
tests/integration/test_ssl_clients.py; here the socket server runs in this process so that the
principal each request carries can be read.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

from broker.config.broker_config import BrokerConfig, Listener, load_broker_config
from broker.network.socket_server import SocketServer
from broker.request_context import RequestContext
from broker.security.channel_builders import ListenerSecurity, inter_broker_ssl_context, listener_security
from broker.security.kafka_principal import ANONYMOUS, KafkaPrincipal
from broker.security.ssl_factory import SslConfigError, openssl_cipher_name
from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaConnectionError
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from pytest_pafka.tls import CLIENT_DN, KEY_PASSWORD, TlsCertificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsCertificates:
    return TlsCertificates.create(tmp_path_factory.mktemp("tls"))


def _config(**props: Any) -> BrokerConfig:
    return BrokerConfig.model_validate({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **props})


def _stores(certs: TlsCertificates, prefix: str = "") -> dict[str, str]:
    return dict(item.split("=", 1) for item in certs.broker_overrides(prefix))


def _client_context(certs: TlsCertificates, cert: Path | None = None, key: Path | None = None,
                    ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca or certs.ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


# -- settings ------------------------------------------------------------------------------
def test_listener_prefix_wins_key_by_key(certs: TlsCertificates) -> None:
    config = _config(**_stores(certs), **{"ssl.client.auth": "requested",
                                           "listener.name.ssl.ssl.client.auth": "required",
                                           "listener.name.ssl.ssl.enabled.protocols": "TLSv1.3"})
    ssl_listener = config.ssl_config_for("SSL")
    assert ssl_listener.ssl_client_auth == "required"
    assert ssl_listener.ssl_enabled_protocols == ["TLSv1.3"]
    assert ssl_listener.ssl_keystore_location == str(certs.broker_keystore)  # not overridden: the broker's
    assert config.ssl_config_for("OTHER").ssl_client_auth == "requested"
    context = listener_security(config, "SSL").ssl_context
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_plaintext_listeners_have_no_context(certs: TlsCertificates) -> None:
    config = _config(**_stores(certs))
    assert listener_security(config, "PLAINTEXT") == ListenerSecurity("PLAINTEXT")
    assert inter_broker_ssl_context(config) is None
    internal = BrokerConfig.model_validate({
        "listeners": "INTERNAL://127.0.0.1:0", "listener.security.protocol.map": "INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL", **_stores(certs, "listener.name.internal.")})
    context = inter_broker_ssl_context(internal)
    assert context is not None and context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_sasl_ssl_applies_client_auth_only_with_the_listener_prefix(certs: TlsCertificates) -> None:
    props = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SASL_SSL", "ssl.client.auth": "required",
             **_stores(certs)}
    context = listener_security(_config(**props), "SSL").ssl_context
    assert context is not None and context.verify_mode == ssl.CERT_NONE
    props["listener.name.ssl.ssl.client.auth"] = "required"
    context = listener_security(_config(**props), "SSL").ssl_context
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(("props", "message"), [
    ({}, "An SSL listener needs a key store"),
    ({"ssl.keystore.type": "JKS"}, "pafka reads PEM key stores only"),
    ({"ssl.keystore.password": "p"}, "SSL key store password cannot be specified with PEM format"),
    ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"}, "Both SSL key store location and separate private key"),
    ({"ssl.truststore.password": "p"}, "SSL trust store password cannot be specified for PEM format."),
    ({"ssl.truststore.certificates": "x"}, "Both SSL trust store location and separate trust certificates"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.3"}, "contiguous range"),
    ({"ssl.enabled.protocols": "SSLv3"}, "ssl.enabled.protocols"),
    ({"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}, "unsupported cipher suite TLS_NO_SUCH_SUITE"),
    ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "TLSv1.3 suites cannot be narrowed"),
    ({"ssl.keystore.location": "/nonexistent/keystore.pem"}, "cannot load the PEM key store /nonexistent"),
])
def test_kafka_checks_of_the_stores(certs: TlsCertificates, props: dict[str, str], message: str) -> None:
    settings = {**_stores(certs), "ssl.client.auth": "required", **props}
    if not props:
        settings = {}
    with pytest.raises(SslConfigError, match=message):
        listener_security(_config(**settings), "SSL")


def test_pem_text_in_a_properties_file_with_an_encrypted_key(certs: TlsCertificates, tmp_path: Path) -> None:
    """Kafka's PEM-in-config form as operators write it: values continued over lines with backslashes
    (joined without line breaks), an encrypted PKCS#8 key opened with ssl.key.password."""
    def continued(path: Path) -> str:
        return " \\\n".join(path.read_text().strip().splitlines())

    chain = certs.broker_cert.read_text() + certs.ca.read_text()
    (tmp_path / "chain.pem").write_text(chain)
    properties = tmp_path / "server.properties"
    properties.write_text("\n".join([
        "listeners=SSL://127.0.0.1:0",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.key={continued(certs.broker_encrypted_key)}",
        f"ssl.keystore.certificate.chain={continued(tmp_path / 'chain.pem')}",
        f"ssl.key.password={KEY_PASSWORD}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.certificates={continued(certs.ca)}",
        "ssl.client.auth=required",
    ]) + "\n")
    config = load_broker_config(properties, environ={})
    assert "\n" not in config.ssl_keystore_key.get_secret_value()  # type: ignore[union-attr]
    assert KEY_PASSWORD not in repr(config)
    security = listener_security(config, "SSL")
    principals = asyncio.run(_principals_seen(security, _client_context(certs, certs.client_cert, certs.client_key)))
    assert principals == [KafkaPrincipal("User", CLIENT_DN)]
    wrong = load_broker_config(properties, ["ssl.key.password=wrong-password"], environ={})
    with pytest.raises(SslConfigError) as refused:
        listener_security(wrong, "SSL")
    assert "wrong-password" not in str(refused.value)


def test_iana_cipher_suite_names_are_translated() -> None:
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_GCM_SHA384") == "AES256-GCM-SHA384"
    assert openssl_cipher_name("ECDHE-ECDSA-AES256-GCM-SHA384") == "ECDHE-ECDSA-AES256-GCM-SHA384"


# -- principals over real TLS connections -------------------------------------------------------
async def _principals_seen(security: ListenerSecurity, client: ssl.SSLContext | None) -> list[KafkaPrincipal]:
    """Serve one listener with ``security``; one ApiVersions from a client with ``client`` (None:
    plain TCP); the principals the handler saw."""
    seen: list[KafkaPrincipal] = []

    def dispatch(ctx: RequestContext) -> ApiVersionsResponse:
        seen.append(ctx.principal)
        return ApiVersionsResponse(error_code=0, api_keys=[ApiVersion(api_key=18, min_version=0, max_version=3)])

    server = SocketServer(dispatch, lambda: ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION),
                          max_request_size=1 << 20)
    await server.start([Listener("L", "127.0.0.1", 0)], {"L": security})
    try:
        connection = AsyncBrokerConnection("127.0.0.1", server.bound["L"][1], ssl_context=client)
        await connection.connect(timeout=5, negotiate=False)
        try:
            await connection.request(ApiVersionsRequest(), version=3, timeout=5)
        finally:
            connection.close()
    finally:
        server.stop_accepting()
        await server.drain(1)
    return seen


def test_principal_of_each_kind_of_client(certs: TlsCertificates) -> None:
    config = _config(**_stores(certs), **{
        "ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT"})
    tls = listener_security(config, "SSL")
    with_cert = _client_context(certs, certs.client_cert, certs.client_key)
    assert asyncio.run(_principals_seen(tls, with_cert)) == [KafkaPrincipal("User", "serviceuser")]
    assert asyncio.run(_principals_seen(tls, _client_context(certs))) == [ANONYMOUS]
    assert asyncio.run(_principals_seen(listener_security(config, "PLAINTEXT"), None)) == [ANONYMOUS]


def test_a_subject_no_rule_maps_is_not_authenticated(certs: TlsCertificates, caplog: pytest.LogCaptureFixture) -> None:
    config = _config(**_stores(certs), **{"ssl.client.auth": "required",
                                           "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Admins.*$/$1/"})
    with_cert = _client_context(certs, certs.client_cert, certs.client_key)
    with pytest.raises(KafkaConnectionError):
        asyncio.run(_principals_seen(listener_security(config, "SSL"), with_cert))
    assert f"authentication failed: No rules apply to {CLIENT_DN}" in caplog.text


@pytest.mark.parametrize("client", ["untrusted certificate", "no certificate", "broker not trusted"])
def test_refused_handshakes(certs: TlsCertificates, client: str) -> None:
    security = listener_security(_config(**_stores(certs), **{"ssl.client.auth": "required"}), "SSL")
    context = {
        "untrusted certificate": _client_context(certs, certs.untrusted_client_cert, certs.untrusted_client_key),
        "no certificate": _client_context(certs),
        "broker not trusted": _client_context(certs, certs.client_cert, certs.client_key, ca=certs.untrusted_ca),
    }[client]
    with pytest.raises(KafkaConnectionError):
        asyncio.run(_principals_seen(security, context))
