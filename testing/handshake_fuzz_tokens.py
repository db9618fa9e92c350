"""Seeded SASL tokens for the handshake fuzzer: PLAIN responses and SCRAM client messages.

Each generator returns the token and what the broker must make of it: ``OK`` (valid credentials:
authentication must succeed), ``FAIL`` (well formed but wrong: it must fail) or ``ANY`` (mangled:
either is acceptable, as long as the broker answers or closes and lives on). A truncated valid
client-first message, say, may still parse (``r=`` with a shorter nonce), so it is ``ANY``.
"""

from __future__ import annotations

import base64
import enum
import functools
import random
import string
from dataclasses import dataclass

from client.scram import ClientFirstMessage as ScramClientFirst
from client.scram import ScramMechanism, ServerFirstMessage, auth_message, sasl_name, xor

#: Kept under sasl.server.max.receive.size (512 KiB) with room for the request around it.
MAX_BIG_TOKEN = 400_000
_NONCE_CHARS = string.ascii_letters + string.digits + "+/-_."


class Expect(enum.Enum):
    OK = "ok"
    FAIL = "fail"
    ANY = "any"


@dataclass(frozen=True)
class Credentials:
    """The users the fuzzed broker knows: a PLAIN user (JAAS) and a SCRAM user (both mechanisms)."""

    plain_user: str = "alice"
    plain_password: str = "alice-secret"
    scram_user: str = "bob"
    scram_password: str = "bob-secret"


# -- bytes ------------------------------------------------------------------------------------
def random_bytes(rng: random.Random, max_len: int = 2048) -> bytes:
    return rng.randbytes(rng.randint(0, max_len))


def truncated(rng: random.Random, data: bytes) -> bytes:
    """``data`` cut short at a random point (never whole, possibly empty)."""
    return data[: rng.randrange(len(data))] if data else b""


def mutated(rng: random.Random, data: bytes) -> bytes:
    """A few bytes of ``data`` flipped, dropped or inserted."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(3)
        pos = rng.randrange(len(out) + 1)
        if op == 0 and pos < len(out):
            out[pos] ^= 1 << rng.randrange(8)
        elif op == 1 and pos < len(out):
            del out[pos]
        else:
            out[pos:pos] = rng.randbytes(1)
    return bytes(out)


def random_text(rng: random.Random, max_len: int = 40) -> str:
    """Printable ASCII, arbitrary Unicode (surrogates excluded: they cannot be encoded) or control bytes."""
    n = rng.randint(0, max_len)
    style = rng.randrange(3)
    if style == 0:
        return "".join(rng.choice(string.printable) for _ in range(n))
    if style == 1:
        return "".join(chr(c) for c in (rng.randint(1, 0x10FFFF) for _ in range(n)) if not 0xD800 <= c < 0xE000)
    return "".join(chr(rng.randint(0, 31)) for _ in range(n))


def nonce(rng: random.Random) -> str:
    return "".join(rng.choice(_NONCE_CHARS) for _ in range(rng.randint(8, 40)))


# -- mechanism names ------------------------------------------------------------------------------
ENABLED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_NEAR_MISSES = ("plain", "PLAIN ", " PLAIN", "PLAIN\0", "SCRAM-SHA-1", "SCRAM-SHA-384", "scram-sha-256",
                "SCRAM-SHA-256\n", "GSSAPI", "OAUTHBEARER", "DIGEST-MD5", "ANONYMOUS", "", "SCRAM-SHA-")


def unsupported_mechanism(rng: random.Random) -> str:
    """A name the broker does not offer: near misses, random text, or a long string."""
    style = rng.randrange(3)
    if style == 0:
        name = rng.choice(_NEAR_MISSES)
    elif style == 1:
        name = random_text(rng)
    else:
        name = rng.choice(string.ascii_uppercase) * rng.randint(100, 20_000)
    return name if name not in ENABLED_MECHANISMS else name + "-X"


# -- PLAIN --------------------------------------------------------------------------------------
def plain_token(rng: random.Random, creds: Credentials) -> tuple[bytes, Expect]:
    user, password = creds.plain_user.encode(), creds.plain_password.encode()
    valid = b"\0" + user + b"\0" + password
    style = rng.randrange(10)
    if style == 0:
        return valid, Expect.OK
    if style == 1:
        return user + b"\0" + user + b"\0" + password, Expect.OK  # authorization id = user name
    if style == 2:
        return b"\0" + user + b"\0" + mutated(rng, password), Expect.ANY
    if style == 3:
        return b"\0" + random_text(rng).encode() + b"\0" + password, Expect.ANY
    if style == 4:
        return truncated(rng, valid), Expect.FAIL  # a cut valid token lacks the password or its end
    if style == 5:
        return b"\0".join(random_bytes(rng, 30) for _ in range(rng.randint(0, 6))), Expect.ANY
    if style == 6:
        return b"other\0" + user + b"\0" + password, Expect.FAIL  # another authorization id
    if style == 7:
        return b"\0" + user + b"\0" + rng.randbytes(rng.randint(1, MAX_BIG_TOKEN)), Expect.ANY
    if style == 8:
        return b"\0" + user + b"\0" + password + b"\0", Expect.FAIL  # four tokens
    return random_bytes(rng), Expect.ANY


# -- SCRAM --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScramFirst:
    token: bytes
    expect: Expect
    #: What a following client-final needs, when the message is a valid one for the real user.
    gs2_header: str = "n,,"
    client_first_bare: str = ""
    client_nonce: str = ""


def scram_client_first(rng: random.Random, creds: Credentials) -> ScramFirst:
    client_nonce = nonce(rng)
    name = sasl_name(creds.scram_user)
    bare = f"n={name},r={client_nonce}"
    style = rng.randrange(12)
    if style <= 3:
        return ScramFirst(f"n,,{bare}".encode(), Expect.OK, "n,,", bare, client_nonce)
    if style == 4:
        header = f"n,a={name},"
        return ScramFirst(f"{header}{bare}".encode(), Expect.OK, header, bare, client_nonce)
    if style == 5:
        return ScramFirst(truncated(rng, f"n,,{bare}".encode()), Expect.ANY)
    if style == 6:
        return ScramFirst(f"n,,n={random_text(rng, 20).replace(',', '')},r={client_nonce}".encode(), Expect.ANY)
    if style == 7:
        return ScramFirst(f"n,a=mallory,{bare}".encode(), Expect.FAIL)  # authorization id of another user
    if style == 8:
        bad = rng.choice(["=", "=2", "=ZZ", "=3d", "=2c"])
        return ScramFirst(f"n,,n=b{bad}ob,r={client_nonce}".encode(), Expect.FAIL)  # a bad escape
    if style == 9:
        return ScramFirst(f"n,,{bare},t=tokenauth".encode(), Expect.FAIL)  # extensions are refused
    if style == 10:
        return ScramFirst(rng.choice([b"y,,", b"p=tls-unique,,", b"", b"n,"]) + bare.encode(), Expect.FAIL)
    return ScramFirst(mutated(rng, f"n,,{bare}".encode()), Expect.ANY)


@functools.lru_cache(maxsize=64)
def _salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    # PBKDF2 with 4096 rounds is the costliest thing a case does; the salt is fixed per user.
    return mechanism.salted_password(password, salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _proof(mechanism: ScramMechanism, creds: Credentials, first: ScramFirst, server_first: str,
           without_proof: str) -> bytes:
    parsed = ServerFirstMessage.parse(server_first.encode())
    salted = _salted_password(mechanism, creds.scram_password, parsed.salt, parsed.iterations)
    client_key = mechanism.client_key(salted)
    client_first = ScramClientFirst("", "", first.client_nonce, {}, first.client_first_bare)
    message = auth_message(client_first, server_first, without_proof)
    return xor(client_key, mechanism.hmac(mechanism.stored_key(client_key), message))


def scram_client_final(rng: random.Random, mechanism: ScramMechanism, creds: Credentials, first: ScramFirst,
                       server_first: str) -> tuple[bytes, Expect]:
    """A client-final message answering ``server_first`` (whose nonce extends the client's)."""
    server_nonce = ServerFirstMessage.parse(server_first.encode()).nonce
    binding = _b64(first.gs2_header.encode())
    without_proof = f"c={binding},r={server_nonce}"
    proof = _proof(mechanism, creds, first, server_first, without_proof)
    valid = f"{without_proof},p={_b64(proof)}"
    style = rng.randrange(12)
    if style <= 2:
        return valid.encode(), Expect.OK
    if style == 3:
        return f"{without_proof},p={_b64(rng.randbytes(len(proof)))}".encode(), Expect.FAIL
    if style == 4:
        return f"{without_proof},p={_b64(proof[:-1])}".encode(), Expect.FAIL  # a proof of the wrong length
    if style == 5:
        # Invalid base64 that the message's character classes still admit: bad padding, a stray '='.
        bad = rng.choice(["abc", "a", "abcde", "ab=c", "====", "YQ", "YWJj=="])
        return f"{without_proof},p={bad}".encode(), Expect.FAIL
    if style == 6:
        bad = rng.choice(["abc", "b", "biw", "eSws", "cD10bHMtdW5pcXVlLCw=", ""])
        return f"c={bad},r={server_nonce},p={_b64(proof)}".encode(), Expect.FAIL  # wrong channel binding
    if style == 7:
        return f"c={binding},r={nonce(rng)},p={_b64(proof)}".encode(), Expect.FAIL  # not the server's nonce
    if style == 8:
        return truncated(rng, valid.encode()), Expect.ANY
    if style == 9:
        return f"{without_proof},x={random_text(rng, 10).replace(',', '')},p={_b64(proof)}".encode(), Expect.ANY
    if style == 10:
        return mutated(rng, valid.encode()), Expect.ANY
    return random_bytes(rng, 300), Expect.ANY
