"""The client side of SASL: Kafka's PLAIN and SCRAM SaslClients and the settings that choose one.

A mechanism is sans-IO: :meth:`SaslClient.evaluate` takes the server's last
token (``b""`` to start) and returns the next one to send; the connections
(``client.connection``, ``client.async_connection``) carry tokens in
SaslHandshake v1 + SaslAuthenticate requests, as Kafka's
SaslClientAuthenticator does. :class:`SaslSettings` comes from Kafka's client
properties (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``)
or from a broker's inter-broker listener.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from client.errors import KafkaClientError
from client.jaas_config import single_login_module
from client.scram import (
    ClientFinalMessage,
    ClientFirstMessage,
    ScramMechanism,
    ServerFirstMessage,
    auth_message,
    parse_server_final,
    secure_random_string,
    xor,
)
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from protocol.primitives import Message

PLAIN = "PLAIN"
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class SaslClientError(KafkaClientError):
    """Authentication could not proceed or the broker refused it (Kafka's SaslAuthenticationException)."""


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """A client's mechanism and credentials (the password is never shown)."""

    mechanism: str
    username: str
    password: str = field(repr=False)

    def new_client(self) -> SaslClient:
        if self.mechanism == PLAIN:
            return PlainSaslClient(self.username, self.password)
        scram = ScramMechanism.for_name(self.mechanism)
        if scram is None:
            raise SaslClientError(f"Unsupported SASL mechanism {self.mechanism}")
        return ScramSaslClient(scram, self.username, self.password)

    @classmethod
    def from_jaas(cls, mechanism: str, jaas_config: str) -> SaslSettings:
        """From a PlainLoginModule / ScramLoginModule entry's ``username`` and ``password``."""
        options = single_login_module(jaas_config).options
        if "username" not in options or "password" not in options:
            raise SaslClientError(f"sasl.jaas.config for {mechanism} has no username and password")
        return cls(mechanism, options["username"], options["password"])

    @classmethod
    def from_client_properties(cls, props: Mapping[str, str]) -> SaslSettings | None:
        """A client's SASL settings from its properties; None when security.protocol is not SASL."""
        if props.get("security.protocol", "PLAINTEXT").upper() not in SASL_PROTOCOLS:
            return None
        mechanism = props.get("sasl.mechanism", "GSSAPI")
        if "sasl.jaas.config" not in props:
            raise SaslClientError("sasl.jaas.config is required with security.protocol SASL_*")
        return cls.from_jaas(mechanism, props["sasl.jaas.config"])


class SaslClient:
    mechanism: str
    complete: bool = False

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token to send after the server's ``challenge`` (b"" to start); None once done."""
        raise NotImplementedError


class PlainSaslClient(SaslClient):
    """RFC 4616: one message, ``authzid NUL authcid NUL passwd`` (an empty authzid, as Kafka's)."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self.complete:
            return None  # the server's (empty) answer: accepted
        self.complete = True
        return self._token


class ScramSaslClient(SaslClient):
    """Kafka's ScramSaslClient: client-first, client-final with the proof, then the server's signature checked."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._password = password
        self._first = ClientFirstMessage.of(username, nonce or secure_random_string())
        self._step = 0
        self._server_signature = b""

    def evaluate(self, challenge: bytes) -> bytes | None:
        step, self._step = self._step, self._step + 1
        if step == 0:
            return self._first.to_bytes()
        if step == 1:
            return self._client_final(challenge)
        if step == 2:
            self._check_server_final(challenge)
            self.complete = True
        return None

    def _client_final(self, challenge: bytes) -> bytes:
        server_first = ServerFirstMessage.parse(challenge)
        if not server_first.nonce.startswith(self._first.nonce):
            raise SaslClientError("Invalid server nonce: does not start with client nonce")
        if server_first.iterations < 4096:
            raise SaslClientError(f"Requested iterations {server_first.iterations} is less than the minimum 4096 "
                                  f"for {self.mechanism}")
        scram = self._scram
        salted = scram.salted_password(self._password, server_first.salt, server_first.iterations)
        without_proof = ClientFinalMessage.of(self._first.gs2_header, server_first.nonce, b"").without_proof
        message = auth_message(self._first, challenge.decode(), without_proof)
        client_key = scram.client_key(salted)
        proof = xor(client_key, scram.hmac(scram.stored_key(client_key), message))
        self._server_signature = scram.hmac(scram.server_key(salted), message)
        return ClientFinalMessage.of(self._first.gs2_header, server_first.nonce, proof).to_bytes()

    def _check_server_final(self, challenge: bytes) -> None:
        error, signature = parse_server_final(challenge)
        if error is not None:
            raise SaslClientError(f"Sasl authentication using {self.mechanism} failed with error: {error}")
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError("Invalid server signature in server final message")


# -- the requests that carry the tokens (Kafka's SaslClientAuthenticator) --------------------------
def handshake_request(settings: SaslSettings) -> SaslHandshakeRequest:
    return SaslHandshakeRequest(mechanism=settings.mechanism)


def check_handshake(response: Message, settings: SaslSettings) -> None:
    assert isinstance(response, SaslHandshakeResponse)
    if response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        raise SaslClientError(f"Client SASL mechanism '{settings.mechanism}' not enabled in the server, enabled "
                              f"mechanisms are {response.mechanisms}")
    if response.error_code != ErrorCode.NO_ERROR:
        raise SaslClientError(f"SaslHandshake failed: {ErrorCode(response.error_code).name}")


def authenticate_request(token: bytes) -> SaslAuthenticateRequest:
    return SaslAuthenticateRequest(auth_bytes=token)


def challenge_of(response: Message) -> bytes:
    """The server's token in a SaslAuthenticate response; SaslClientError with its message on failure."""
    assert isinstance(response, SaslAuthenticateResponse)
    if response.error_code != ErrorCode.NO_ERROR:
        raise SaslClientError(response.error_message or ErrorCode(response.error_code).name)
    return response.auth_bytes
