"""Kafka's SaslServerAuthenticator: one SASL connection's way from its first request to a principal.

On a SASL_PLAINTEXT or SASL_SSL listener a client may send ApiVersions and
then SaslHandshake; after a v1 handshake only SaslAuthenticate requests, whose
tokens go to the mechanism's SaslServer, until it completes and the connection
becomes ``User:<authorization id>``. Any other request before that closes the
connection, as Kafka's IllegalSaslStateException does. After a v0 handshake
the client sends the mechanism's tokens as bare size-prefixed frames (no Kafka
request header), the original SASL wire form.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` set for the
listener's mechanism, a client authenticating with SaslAuthenticate v1+ is told
its session's lifetime; before it ends the client sends SaslHandshake v1 and
SaslAuthenticate again on the same connection, with the same mechanism and as
the same principal (else the connection closes). A request other than
SaslHandshake on a session past its end closes the connection, as Kafka does.
Older clients are told nothing and their sessions never end.

A failed authentication (a wrong password, an unknown user or mechanism) is
logged once at INFO with the message the client is given, which never holds a
secret; the connection answers and closes after
``connection.failed.authentication.delay.ms`` (KIP-306), muted meanwhile, so a
client guessing passwords is slowed down without holding anyone else up.
"""

from __future__ import annotations

import enum

from broker.config.sasl_config import PLAIN, SaslListenerConfig
from broker.security.credential_cache import CredentialCache
from broker.security.sasl_server import (
    PlainSaslServer,
    SaslAuthenticationError,
    SaslError,
    SaslServer,
    ScramSaslServer,
)
from client.scram import ScramMechanism
from protocol.api import API_VERSIONS_KEY
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest

SASL_HANDSHAKE_KEY = SaslHandshakeRequest.API_KEY
SASL_AUTHENTICATE_KEY = SaslAuthenticateRequest.API_KEY


class SaslState(enum.Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = enum.auto()
    AUTHENTICATE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class SaslServerAuthenticator:
    def __init__(self, config: SaslListenerConfig, credentials: CredentialCache) -> None:
        self.config = config
        self._credentials = credentials
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self.server: SaslServer | None = None
        #: After a v0 handshake: tokens arrive as bare frames.
        self.raw_tokens = False
        #: The authenticated session (KIP-368): its principal name, mechanism and end (loop time,
        #: None: never ends); ``reauthenticating`` while a new SaslHandshake's exchange runs.
        self.session_authorization_id: str | None = None
        self.session_mechanism: str | None = None
        self.session_expires_at: float | None = None
        self.reauthenticating = False

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def enabled_mechanisms(self) -> list[str]:
        return list(self.config.mechanisms)

    def refusal(self, api_key: int, api_name: str) -> str | None:
        """Why a request may not be handled in the current state (None: it may)."""
        if self.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
            if api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY):
                return None
            return f"Unexpected Kafka request of type {api_name} during SASL handshake."
        if self.state is SaslState.AUTHENTICATE and api_key == SASL_AUTHENTICATE_KEY:
            return None
        return f"Unexpected Kafka request of type {api_name} during SASL authentication."

    def handshake(self, mechanism: str, version: int) -> bool:
        """Start ``mechanism`` (False: not enabled on this listener)."""
        if mechanism not in self.config.mechanisms:
            return False
        self.server = self._new_server(mechanism)
        self.state = SaslState.AUTHENTICATE
        self.raw_tokens = version == 0
        return True

    def reauthentication_refusal(self, mechanism: str, version: int) -> str | None:
        """Why a SaslHandshake on an authenticated connection cannot start re-authentication (None: it can)."""
        if version < 1:
            return "re-authentication needs SaslHandshake v1"
        if mechanism != self.session_mechanism:
            return (f"SASL mechanism {mechanism[:100]!r} requested by client differs from the session's "
                    f"{self.session_mechanism}")
        return None

    def reauthenticate(self, mechanism: str) -> None:
        self.handshake(mechanism, 1)
        self.reauthenticating = True

    def begin_session(self, now: float, authenticate_version: int) -> int:
        """Authentication completed at loop time ``now``: the session lifetime (ms) to tell the
        client, 0 when its session never ends (no limit set, or a client that cannot re-authenticate)."""
        assert self.server is not None
        self.session_authorization_id = self.server.authorization_id
        self.session_mechanism = self.server.mechanism
        self.reauthenticating = False
        lifetime_ms = self.config.max_reauth_ms.get(self.server.mechanism, 0)
        if lifetime_ms <= 0 or authenticate_version < 1 or self.raw_tokens:
            self.session_expires_at = None
            return 0
        self.session_expires_at = now + lifetime_ms / 1000.0
        return lifetime_ms

    def session_expired(self, now: float) -> bool:
        return self.session_expires_at is not None and now > self.session_expires_at

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainSaslServer(self.config.plain_users)
        scram = ScramMechanism.for_name(mechanism)
        assert scram is not None, mechanism  # the listener serves only PLAIN and SCRAM
        return ScramSaslServer(scram, self._credentials.get)

    def authenticate(self, token: bytes) -> bytes:
        """The server's next token; SaslError (state FAILED) when authentication fails."""
        server = self.server
        assert server is not None and self.state is SaslState.AUTHENTICATE
        try:
            challenge = server.evaluate_response(token)
        except SaslError:
            self.state = SaslState.FAILED
            raise
        if server.complete:
            self.state = SaslState.COMPLETE
        return challenge

    @property
    def authorization_id(self) -> str:
        return self.server.authorization_id if self.server is not None else ""

    def fail(self) -> None:
        self.state = SaslState.FAILED


def client_message(error: SaslError, mechanism: str) -> str:
    """What the client is told: a SaslAuthenticationError's own message, else Kafka's generic one."""
    if isinstance(error, SaslAuthenticationError):
        return str(error)
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
