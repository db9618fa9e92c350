"""SCRAM (RFC 5802, RFC 7677) as Kafka implements it: mechanisms, keys, messages, credentials.

Shared by the broker's ScramSaslServer and this client's ScramSaslClient, as
Kafka's ``common.security.scram`` is. A credential is what the broker stores
for a user and mechanism: the salt, the iteration count, ``StoredKey =
H(HMAC(SaltedPassword, "Client Key"))`` and ``ServerKey = HMAC(SaltedPassword,
"Server Key")``; never the password. Kafka writes one as
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
(ScramCredentialUtils), the form kept in ZooKeeper and in a lone broker's file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import Enum

#: Kafka's ScramMechanism bounds on the iteration count.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramMechanism(Enum):
    """Kafka's ScramMechanism: the wire type (AlterUserScramCredentials), SASL name and hash."""

    SCRAM_SHA_256 = (1, "SCRAM-SHA-256", "sha256")
    SCRAM_SHA_512 = (2, "SCRAM-SHA-512", "sha512")

    def __init__(self, type_id: int, mechanism_name: str, hash_name: str) -> None:
        self.type_id = type_id
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name

    @classmethod
    def for_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def for_type(cls, type_id: int) -> ScramMechanism | None:
        return next((m for m in cls if m.type_id == type_id), None)

    def __str__(self) -> str:
        return self.mechanism_name

    # -- ScramFormatter --------------------------------------------------------
    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(Normalize(password), salt, i): PBKDF2 with the mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")

    def stored_key(self, client_key: bytes) -> bytes:
        return self.hash(client_key)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        client_key = mechanism.client_key(salted_password)
        return cls(salt, mechanism.stored_key(client_key), mechanism.server_key(salted_password), iterations)

    @classmethod
    def generate(cls, mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS,
                 salt: bytes | None = None) -> ScramCredential:
        """A new credential with a random salt (Kafka's ScramFormatter.generateCredential)."""
        salt = salt if salt is not None else secure_random_bytes()
        return cls.from_salted_password(mechanism, salt, mechanism.salted_password(password, salt, iterations),
                                        iterations)

    def to_config_string(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_config_string(cls, text: str) -> ScramCredential:
        """Kafka's ScramCredentialUtils.credentialFromString; ValueError when a part is missing."""
        props = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(base64.b64decode(props["salt"]), base64.b64decode(props["stored_key"]),
                       base64.b64decode(props["server_key"]), int(props["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError("Invalid credential") from exc

    def __repr__(self) -> str:  # keys are secrets of a kind: never printed
        return f"ScramCredential(iterations={self.iterations})"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secure_random_bytes() -> bytes:
    """Kafka's ScramFormatter.secureRandomBytes: a salt."""
    return secrets.token_bytes(32)


def secure_random_string() -> str:
    """A nonce of printable characters other than ',' (RFC 5802's ``printable``)."""
    return secrets.token_urlsafe(24)


# -- RFC 5802 messages (Kafka's ScramMessages) -------------------------------------------------
def sasl_name(username: str) -> str:
    """A user name as a SCRAM ``saslname``: ',' and '=' escaped."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_of(name: str) -> str:
    """Kafka's ScramFormatter.username: a ``saslname`` unescaped; ValueError on a bad escape."""
    if re.search(r"=(?!2C|3D)", name):
        raise ValueError(f"Invalid username: {name}")
    return name.replace("=2C", ",").replace("=3D", "=")


_CLIENT_FIRST = re.compile(
    r"n,(a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<saslname>[^,]*),r=(?P<nonce>[^,]*)(?P<extensions>(,[a-z]=[^,]*)*))")
_SERVER_FIRST = re.compile(r"(m=[^,]*,)?r=(?P<nonce>[^,]*),s=(?P<salt>[A-Za-z0-9+/]*=*),i=(?P<iterations>\d+)(,.*)?")
_CLIENT_FINAL = re.compile(
    r"(?P<without_proof>c=(?P<channel>[A-Za-z0-9+/]*=*),r=(?P<nonce>[^,]*)(,[a-z]=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/]*=*)")
_SERVER_FINAL = re.compile(r"(e=(?P<error>[^,]*)|v=(?P<signature>[A-Za-z0-9+/]*=*))(,.*)?")


class ScramMessageError(ValueError):
    """A SCRAM message that does not parse (Kafka's "Invalid SCRAM ... message format")."""


def _b64_field(text: str, message: str) -> bytes:
    """A base64 attribute of a SCRAM message. The patterns admit only base64 characters, but not
    every string of them decodes ("abc": bad padding); such a message is malformed like any other."""
    try:
        return base64.b64decode(text)
    except binascii.Error:
        raise ScramMessageError(f"Invalid SCRAM {message} message format") from None


@dataclass(frozen=True, slots=True)
class ClientFirstMessage:
    authorization_id: str
    sasl_name: str
    nonce: str
    extensions: dict[str, str]
    bare: str

    @property
    def gs2_header(self) -> str:
        return f"n,{'a=' + self.authorization_id if self.authorization_id else ''},"

    @classmethod
    def parse(cls, data: bytes) -> ClientFirstMessage:
        match = _CLIENT_FIRST.fullmatch(data.decode("utf-8", "replace"))
        if match is None:
            raise ScramMessageError("Invalid SCRAM client first message format")
        extensions = dict(item.split("=", 1) for item in match["extensions"].split(",") if item)
        return cls(match["authzid"] or "", match["saslname"], match["nonce"], extensions, match["bare"])

    @classmethod
    def of(cls, username: str, nonce: str) -> ClientFirstMessage:
        name = sasl_name(username)
        return cls("", name, nonce, {}, f"n={name},r={nonce}")

    def to_bytes(self) -> bytes:
        return (self.gs2_header + self.bare).encode()


@dataclass(frozen=True, slots=True)
class ServerFirstMessage:
    nonce: str
    salt: bytes
    iterations: int

    @classmethod
    def parse(cls, data: bytes) -> ServerFirstMessage:
        match = _SERVER_FIRST.fullmatch(data.decode("utf-8", "replace"))
        if match is None:
            raise ScramMessageError("Invalid SCRAM server first message format")
        return cls(match["nonce"], _b64_field(match["salt"], "server first"), int(match["iterations"]))

    def to_text(self) -> str:
        return f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}"


@dataclass(frozen=True, slots=True)
class ClientFinalMessage:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, data: bytes) -> ClientFinalMessage:
        match = _CLIENT_FINAL.fullmatch(data.decode("utf-8", "replace"))
        if match is None:
            raise ScramMessageError("Invalid SCRAM client final message format")
        return cls(_b64_field(match["channel"], "client final"), match["nonce"],
                   _b64_field(match["proof"], "client final"), match["without_proof"])

    @classmethod
    def of(cls, gs2_header: str, nonce: str, proof: bytes) -> ClientFinalMessage:
        without_proof = f"c={_b64(gs2_header.encode())},r={nonce}"
        return cls(gs2_header.encode(), nonce, proof, without_proof)

    def to_bytes(self) -> bytes:
        return f"{self.without_proof},p={_b64(self.proof)}".encode()


def auth_message(client_first: ClientFirstMessage, server_first: str, client_final_without_proof: str) -> bytes:
    return f"{client_first.bare},{server_first},{client_final_without_proof}".encode()


def xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def server_final_message(signature: bytes) -> bytes:
    return f"v={_b64(signature)}".encode()


def parse_server_final(data: bytes) -> tuple[str | None, bytes]:
    """(error, server signature) of a server-final-message."""
    match = _SERVER_FINAL.fullmatch(data.decode("utf-8", "replace"))
    if match is None:
        raise ScramMessageError("Invalid SCRAM server final message format")
    if match["error"] is not None:
        return match["error"], b""
    return None, _b64_field(match["signature"], "server final")
