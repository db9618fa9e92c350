"""SASL on the wire, against a broker process: SaslHandshake v0-v1, SaslAuthenticate v0-v2, the gate
before authentication, failed authentications, and the SCRAM credential admin APIs.

One broker serves PLAINTEXT beside SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); SCRAM users
are created with AlterUserScramCredentials over PLAINTEXT. Real clients are in
tests/integration/test_sasl_clients.py.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from client.connection import BrokerConnection
from client.errors import KafkaConnectionError
from client.sasl import SaslClientError, SaslSettings, ScramSaslClient
from client.scram import ScramMechanism, secure_random_bytes
from protocol.api import decode_response, encode_request
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    UserName,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from protocol.primitives import Message
from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port

HOST = "127.0.0.1"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
DELAY_MS = 300
_GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


@dataclass(frozen=True)
class Sasl:
    broker: BrokerProcess
    port: int


@pytest.fixture(scope="module")
def sasl() -> Iterator[Sasl]:
    plain, port = free_port(), free_port()
    with BrokerProcess(f"listeners=PLAINTEXT://{HOST}:{plain},SASL_PLAINTEXT://{HOST}:{port}",
                       f"sasl.enabled.mechanisms={','.join(MECHANISMS)},GSSAPI",
                       f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
                       f"connection.failed.authentication.delay.ms={DELAY_MS}", port=plain) as broker:
        with BrokerConnection(HOST, plain) as admin:
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
                assert _upsert(admin, "bob", mechanism, "bob-secret").results[0].error_code == 0
        yield Sasl(broker, port)
        print(broker.log_text()[-4000:])


def _upsert(connection: BrokerConnection, user: str, mechanism: ScramMechanism, password: str,
            iterations: int = 4096) -> AlterUserScramCredentialsResponse:
    salt = secure_random_bytes()
    upsertion = ScramCredentialUpsertion(name=user, mechanism=mechanism.type_id, iterations=iterations, salt=salt,
                                         salted_password=mechanism.salted_password(password, salt, iterations))
    response = connection.request(AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion]))
    assert isinstance(response, AlterUserScramCredentialsResponse)
    return response


class RawConnection:
    """Frames by hand: versions chosen per request, bare SASL tokens, and the close observed."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.correlation_id = 0

    def request(self, body: Message, version: int) -> Message:
        self.correlation_id += 1
        api_key = type(body).API_KEY  # type: ignore[attr-defined]
        self.sock.sendall(b"".join(bytes(c) for c in encode_request(api_key, version, self.correlation_id,  # type: ignore[arg-type]
                                                                    "pafka-tests", body)))
        correlation_id, response = decode_response(api_key, version, self._frame())
        assert correlation_id == self.correlation_id
        return response

    def token(self, token: bytes) -> bytes:
        """A bare token after a v0 handshake, and the bare answer."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return self._frame()

    def _frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True

    def close(self) -> None:
        self.sock.close()


def _scram_over(connection: RawConnection, mechanism: ScramMechanism, user: str, password: str,
                version: int) -> SaslAuthenticateResponse:
    client = ScramSaslClient(mechanism, user, password)
    token = client.evaluate(b"")
    response = SaslAuthenticateResponse()
    while token is not None:
        answer = connection.request(SaslAuthenticateRequest(auth_bytes=token), version)
        assert isinstance(answer, SaslAuthenticateResponse)
        response = answer
        if response.error_code:
            return response
        token = client.evaluate(response.auth_bytes)
    return response


# -- SaslHandshake --------------------------------------------------------------------------------
def test_handshake_versions(sasl: Sasl) -> None:
    for version in (0, 1):
        raw = RawConnection(sasl.port)
        try:
            response = raw.request(SaslHandshakeRequest(mechanism="PLAIN"), version)
            assert response == SaslHandshakeResponse(error_code=0, mechanisms=MECHANISMS)  # GSSAPI not offered
        finally:
            raw.close()
    # v0: the tokens follow as bare frames, SCRAM's too.
    raw = RawConnection(sasl.port)
    try:
        raw.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0)
        client = ScramSaslClient(ScramMechanism.SCRAM_SHA_512, "bob", "bob-secret")
        token = client.evaluate(b"")
        while token is not None:
            token = client.evaluate(raw.token(token))
        assert client.complete
        assert raw.request(MetadataRequest(topics=[]), 1).brokers  # authenticated: served
    finally:
        raw.close()
    raw = RawConnection(sasl.port)
    try:
        raw.request(SaslHandshakeRequest(mechanism="PLAIN"), 0)
        assert raw.token(b"\0alice\0alice-secret") == b""
        assert raw.request(MetadataRequest(topics=[]), 1).brokers
    finally:
        raw.close()


def test_unsupported_mechanism_gets_the_enabled_ones_then_a_close(sasl: Sasl) -> None:
    raw = RawConnection(sasl.port)
    try:
        response = raw.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert response == SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=MECHANISMS)
        assert raw.closed()
    finally:
        raw.close()


def test_sasl_apis_elsewhere_answer_illegal_sasl_state(sasl: Sasl) -> None:
    raw = RawConnection(sasl.broker.port)  # PLAINTEXT
    try:
        assert raw.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == ErrorCode.ILLEGAL_SASL_STATE
        answer = raw.request(SaslAuthenticateRequest(auth_bytes=b"x"), 2)
        assert isinstance(answer, SaslAuthenticateResponse)
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
    finally:
        raw.close()


# -- SaslAuthenticate -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1, 2])
def test_authenticate_versions(sasl: Sasl, version: int) -> None:
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        raw = RawConnection(sasl.port)
        try:
            assert raw.request(SaslHandshakeRequest(mechanism=mechanism.mechanism_name), 1).error_code == 0
            response = _scram_over(raw, mechanism, "bob", "bob-secret", version)
            assert response.error_code == 0 and response.session_lifetime_ms == 0
            assert raw.request(MetadataRequest(topics=[]), 4).brokers
            again = raw.request(SaslAuthenticateRequest(auth_bytes=b"n,,n=bob,r=x"), version)
            assert isinstance(again, SaslAuthenticateResponse)
            assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
            assert again.error_message == "SaslAuthenticate request received after successful authentication"
        finally:
            raw.close()
    for settings in (SaslSettings("PLAIN", "alice", "alice-secret"), SaslSettings("SCRAM-SHA-256", "bob", "bob-secret")):
        with BrokerConnection(HOST, sasl.port, sasl=settings) as connection:
            assert connection.request(MetadataRequest(topics=[]), version=1).brokers  # type: ignore[union-attr]


def test_requests_before_authentication_close_the_connection(sasl: Sasl) -> None:
    raw = RawConnection(sasl.port)
    try:
        with pytest.raises(ConnectionError):
            raw.request(MetadataRequest(topics=[]), 1)
    finally:
        raw.close()
    raw = RawConnection(sasl.port)
    try:
        raw.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        with pytest.raises(ConnectionError):  # after the handshake only SaslAuthenticate
            raw.request(MetadataRequest(topics=[]), 1)
    finally:
        raw.close()


@pytest.mark.parametrize(("mechanism", "user", "password", "message"), [
    ("PLAIN", "alice", "wrong-password", "Authentication failed: Invalid username or password"),
    ("PLAIN", "mallory", "alice-secret", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-256", "bob", "wrong-password", _GENERIC.format("SCRAM-SHA-256")),
    ("SCRAM-SHA-512", "mallory", "wrong-password", _GENERIC.format("SCRAM-SHA-512")),
])
def test_failed_authentication_is_answered_after_the_delay_then_closed(
        sasl: Sasl, mechanism: str, user: str, password: str, message: str) -> None:
    raw = RawConnection(sasl.port)
    try:
        raw.request(SaslHandshakeRequest(mechanism=mechanism), 1)
        started = time.monotonic()
        if mechanism == "PLAIN":
            token = b"\0" + user.encode() + b"\0" + password.encode()
            response = raw.request(SaslAuthenticateRequest(auth_bytes=token), 2)
            assert isinstance(response, SaslAuthenticateResponse)
        else:
            scram = ScramMechanism.for_name(mechanism)
            assert scram is not None
            response = _scram_over(raw, scram, user, password, 2)
        assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
        assert (response.error_code, response.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        assert raw.closed()
    finally:
        raw.close()
    log = sasl.broker.log_text()
    assert "wrong-password" not in log and "alice-secret" not in log and "bob-secret" not in log
    with pytest.raises(SaslClientError, match="Authentication failed"):
        BrokerConnection(HOST, sasl.port, sasl=SaslSettings(mechanism, user, password)).connect()


@pytest.mark.parametrize("version", [0, 1])
def test_undecodable_base64_in_scram_fails_authentication_without_a_traceback(sasl: Sasl, version: int) -> None:
    """Found by testing/handshake_fuzz: a client-final whose proof is not decodable base64 ("abc") raised
    binascii.Error out of the SaslServer: a logged traceback (v1) or a fatal transport error (v0 tokens)."""
    raw = RawConnection(sasl.port)
    try:
        raw.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), version)
        first = b"n,,n=bob,r=fuzz"
        server_first = (raw.token(first) if version == 0 else
                        _authenticate_bytes(raw.request(SaslAuthenticateRequest(auth_bytes=first), 2)))
        nonce = server_first.split(b",")[0][2:]
        final = b"c=biws,r=" + nonce + b",p=abc"
        if version == 0:
            with pytest.raises(ConnectionError):  # v0 has no error response: the close says it
                raw.token(final)
        else:
            response = raw.request(SaslAuthenticateRequest(auth_bytes=final), 2)
            assert isinstance(response, SaslAuthenticateResponse)
            assert (response.error_code, response.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                                       _GENERIC.format("SCRAM-SHA-256"))
            assert raw.closed()
    finally:
        raw.close()
    log = sasl.broker.log_text()
    assert "Traceback" not in log and "Fatal error" not in log


def _authenticate_bytes(response: Message) -> bytes:
    assert isinstance(response, SaslAuthenticateResponse) and response.error_code == 0
    return response.auth_bytes


def test_frames_before_authentication_are_limited_to_sasl_server_max_receive_size(sasl: Sasl) -> None:
    """Found by testing/handshake_fuzz: an unauthenticated client announcing a frame of up to
    socket.request.max.bytes (100 MiB) made the broker allocate that much at once, per connection.
    As in Kafka (sasl.server.max.receive.size, 512 KiB by default) that fails the authentication;
    once authenticated, frames up to socket.request.max.bytes are read as before."""
    too_big = 524288 + 1
    for version in (None, 0):  # before the handshake, and in place of a v0 handshake's bare token
        raw = RawConnection(sasl.port)
        try:
            if version is not None:
                raw.request(SaslHandshakeRequest(mechanism="PLAIN"), version)
            started = time.monotonic()  # before sending: the broker's delay may start at once
            raw.sock.sendall(struct.pack(">i", too_big) + bytes(1000))
            assert raw.closed()
            assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9  # a failed authentication's delay
        finally:
            raw.close()
    assert f"Failing SASL authentication due to invalid receive size: frame of {too_big} bytes" in sasl.broker.log_text()
    raw = RawConnection(sasl.port)
    try:
        raw.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        answer = raw.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
        assert isinstance(answer, SaslAuthenticateResponse) and answer.error_code == 0
        raw.correlation_id += 1
        frame = b"".join(bytes(c) for c in encode_request(3, 1, raw.correlation_id, "pafka-tests",  # type: ignore[arg-type]
                                                          MetadataRequest(topics=[])))
        padded = frame[4:] + bytes(too_big)  # bytes after a request's body are ignored, as Kafka ignores them
        raw.sock.sendall(struct.pack(">i", len(padded)) + padded)
        correlation_id, response = decode_response(3, 1, raw._frame())
        assert correlation_id == raw.correlation_id and isinstance(response, MetadataResponse) and response.brokers
    finally:
        raw.close()


# -- DescribeUserScramCredentials / AlterUserScramCredentials --------------------------------------
def _describe(connection: BrokerConnection, users: list[str] | None) -> DescribeUserScramCredentialsResponse:
    names = None if users is None else [UserName(name=u) for u in users]
    response = connection.request(DescribeUserScramCredentialsRequest(users=names))
    assert isinstance(response, DescribeUserScramCredentialsResponse)
    return response


def test_describe_and_alter_user_scram_credentials(sasl: Sasl) -> None:
    with BrokerConnection(HOST, sasl.broker.port) as admin:
        assert _upsert(admin, "carol", ScramMechanism.SCRAM_SHA_256, "carol-1", iterations=8192).results[0].error_code == 0
        described = _describe(admin, ["carol", "nobody", "bob", "bob"])
        rows = {(r.user, r.error_code, r.error_message): [(c.mechanism, c.iterations) for c in r.credential_infos]
                for r in described.results}
        assert rows == {
            ("carol", 0, None): [(1, 8192)],
            ("nobody", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist"): [],
            ("bob", ErrorCode.DUPLICATE_RESOURCE,
             "Cannot describe SCRAM credentials for the same user twice in a single request"): []}
        assert {r.user for r in _describe(admin, None).results} >= {"bob", "carol"}
        # The new password works at once; the old one no longer does.
        _upsert(admin, "carol", ScramMechanism.SCRAM_SHA_256, "carol-2")
        with BrokerConnection(HOST, sasl.port, sasl=SaslSettings("SCRAM-SHA-256", "carol", "carol-2")):
            pass
        with pytest.raises(SaslClientError):
            BrokerConnection(HOST, sasl.port, sasl=SaslSettings("SCRAM-SHA-256", "carol", "carol-1")).connect()
        bad = [ScramCredentialUpsertion(name="dave", mechanism=1, iterations=1000, salt=b"s", salted_password=b"p"),
               ScramCredentialUpsertion(name="erin", mechanism=1, iterations=20000, salt=b"s", salted_password=b"p"),
               ScramCredentialUpsertion(name="frank", mechanism=9, iterations=4096, salt=b"s", salted_password=b"p"),
               ScramCredentialUpsertion(name="", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p")]
        deletions = [ScramCredentialDeletion(name="carol", mechanism=2), ScramCredentialDeletion(name="bob", mechanism=1),
                     ScramCredentialDeletion(name="gina", mechanism=1), ScramCredentialDeletion(name="gina", mechanism=1)]
        response = admin.request(AlterUserScramCredentialsRequest(deletions=deletions, upsertions=bad))
        assert isinstance(response, AlterUserScramCredentialsResponse)
        assert {(r.user, r.error_code, r.error_message) for r in response.results} == {
            ("carol", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            ("bob", 0, None),
            ("gina", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
            ("dave", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            ("erin", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            ("frank", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            ("", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")}
        assert [(c.mechanism, c.iterations) for c in _describe(admin, ["bob"]).results[0].credential_infos] == [(2, 4096)]
        _upsert(admin, "bob", ScramMechanism.SCRAM_SHA_256, "bob-secret")  # as the other tests expect


def test_credentials_survive_a_restart(sasl: Sasl) -> None:
    with BrokerConnection(HOST, sasl.broker.port) as admin:
        _upsert(admin, "henry", ScramMechanism.SCRAM_SHA_512, "henry-secret")
    stored = (sasl.broker.data_dir / "user-scram-credentials.json").read_text()
    assert '"henry"' in stored and "henry-secret" not in stored and "iterations=4096" in stored
    sasl.broker.restart()
    with BrokerConnection(HOST, sasl.port, sasl=SaslSettings("SCRAM-SHA-512", "henry", "henry-secret")) as connection:
        assert connection.connected


def test_jaas_configs_are_sensitive_in_describe_configs(sasl: Sasl) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": sasl.broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    jaas = entries["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas.value is None and jaas.is_sensitive
    assert all("admin-secret" not in str(entry.value) for entry in entries.values())


def test_a_closed_connection_fails_cleanly(sasl: Sasl) -> None:
    with pytest.raises((KafkaConnectionError, SaslClientError)):
        BrokerConnection(HOST, sasl.port, sasl=SaslSettings("GSSAPI", "x", "y")).connect()
