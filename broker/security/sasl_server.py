"""Kafka's SaslServers for PLAIN and SCRAM: tokens in, tokens out, an authorization id at the end.

Two kinds of failure, as in Kafka: a :class:`SaslAuthenticationError` carries
a message the client may see (PLAIN's "Invalid username or password"); any
other :class:`SaslError` is answered with the generic "Authentication failed
during authentication due to invalid credentials with SASL mechanism M", so a
client cannot tell an unknown user from a wrong password. Messages never hold
a password or key.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

from client.scram import (
    ClientFinalMessage,
    ClientFirstMessage,
    ScramCredential,
    ScramMechanism,
    ScramMessageError,
    ServerFirstMessage,
    auth_message,
    secure_random_string,
    server_final_message,
    username_of,
    xor,
)

#: (mechanism, user name) -> the stored credential, None for an unknown user.
CredentialLookup = Callable[[ScramMechanism, str], ScramCredential | None]


class SaslError(Exception):
    """Kafka's SaslException: authentication failed; the client sees only the generic message."""


class SaslAuthenticationError(SaslError):
    """Kafka's SaslAuthenticationException: authentication failed with a message for the client."""


class SaslServer:
    mechanism: str
    complete: bool = False
    authorization_id: str = ""

    def evaluate_response(self, response: bytes) -> bytes:
        raise NotImplementedError


class PlainSaslServer(SaslServer):
    """Kafka's PlainSaslServer: users and passwords from the JAAS ``user_<name>="<password>"`` options."""

    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users

    def evaluate_response(self, response: bytes) -> bytes:
        tokens = response.decode("utf-8", "replace").split("\0")
        if len(tokens) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise SaslError("Authentication failed: username not specified")
        if not password:
            raise SaslError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compared even for an unknown user, so the time taken does not tell which users exist.
        matches = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0").encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


class ScramSaslServer(SaslServer):
    """Kafka's ScramSaslServer: client-first -> server-first, client-final -> server-final."""

    def __init__(self, scram: ScramMechanism, credentials: CredentialLookup) -> None:
        self.mechanism = scram.mechanism_name
        self._scram = scram
        self._credentials = credentials
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            if self._client_first is None:
                return self._server_first_message(ClientFirstMessage.parse(response))
            return self._server_final_message(ClientFinalMessage.parse(response))
        except ScramMessageError as exc:
            raise SaslError(str(exc)) from None

    def _server_first_message(self, first: ClientFirstMessage) -> bytes:
        if first.extensions:
            # Delegation tokens (tokenauth) are not served: Kafka refuses what it does not support.
            raise SaslError(f"Unsupported extensions will not be processed, requested extensions: "
                            f"{sorted(first.extensions)}")
        try:
            username = username_of(first.sasl_name)
        except ValueError:
            raise SaslError("Authentication failed: Credentials could not be obtained") from None
        credential = self._credentials(self._scram, username)
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < 4096:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum 4096 for {self.mechanism}")
        self._client_first, self._credential = first, credential
        self.authorization_id = username
        self._server_first = ServerFirstMessage(first.nonce + secure_random_string(), credential.salt,
                                                credential.iterations)
        return self._server_first.to_text().encode()

    def _server_final_message(self, final: ClientFinalMessage) -> bytes:
        first, server_first, credential = self._client_first, self._server_first, self._credential
        assert first is not None and server_first is not None and credential is not None
        # Kafka checks only that the nonce ends with the server's: older librdkafka (Debian's kcat)
        # sends its own nonce once more in front, and Kafka accepts it.
        if not final.nonce.endswith(server_first.nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        if final.channel_binding != first.gs2_header.encode():
            raise SaslError("Invalid channel binding in the final client message.")
        message = auth_message(first, server_first.to_text(), final.without_proof)
        signature = self._scram.hmac(credential.stored_key, message)
        if len(final.proof) != len(signature):
            raise SaslError("Invalid client credentials")
        computed_stored_key = self._scram.hash(xor(final.proof, signature))
        if not hmac.compare_digest(computed_stored_key, credential.stored_key):
            raise SaslError("Invalid client credentials")
        self.complete = True
        self._credential = None  # Kafka's clearCredentials: nothing kept once done
        return server_final_message(self._scram.hmac(credential.server_key, message))
