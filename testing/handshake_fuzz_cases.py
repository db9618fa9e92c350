"""The handshake fuzzer's cases: what one seeded case sends on a connection, and what it may expect.

A :class:`Session` is one connection to a SASL_PLAINTEXT, SASL_SSL or SSL listener, in one of two
states: ``FRESH`` (not authenticated: only ApiVersions, SaslHandshake and SaslAuthenticate are
served) or ``AUTHENTICATED`` (SASL done, or an SSL listener, whose TLS session is its
authentication). A case picks what to do from the session's state, does it, and leaves the session
open (``answered``: the broker served it and kept the connection, so the next case may run on it)
or closed (by the broker, as expected, or by the case).

The expectations are Kafka's: an unsupported mechanism is answered UNSUPPORTED_SASL_MECHANISM and
the connection closes; a failed SaslAuthenticate is answered SASL_AUTHENTICATION_FAILED and closes;
a failed v0 token closes without an answer; any other request before authentication closes; SASL
requests after it are answered ILLEGAL_SASL_STATE. A mangled input may pass or fail, but it is
answered or the connection closes, within the case's time bound. Anything else raises
:class:`FuzzFailure`.
"""

from __future__ import annotations

import asyncio
import enum
import random
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from client.scram import ScramMechanism
from protocol.api import APIS
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from protocol.primitives import Message
from testing.fuzz_channels import Closed, KafkaWire
from testing.handshake_fuzz_tokens import (
    ENABLED_MECHANISMS,
    Credentials,
    Expect,
    ScramFirst,
    mutated,
    plain_token,
    random_bytes,
    random_text,
    scram_client_final,
    scram_client_first,
    truncated,
    unsupported_mechanism,
)

SASL_KEYS = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate
#: Size prefixes a fuzz case announces; "large" is over the pre-authentication limit but within
#: socket.request.max.bytes, so it is refused only while unauthenticated.
BAD_SIZES = ("negative", "zero", "huge", "large")


class FuzzFailure(Exception):
    """The broker did something a case must not see: no answer, a wrong one, or no close."""


class State(enum.Enum):
    FRESH = "fresh"
    AUTHENTICATED = "authenticated"


@dataclass
class Limits:
    """The broker's settings the cases depend on, and how long a case waits for it."""

    sasl_max_receive: int = 524288
    max_request_size: int = 104857600
    answer_timeout_s: float = 10.0
    close_timeout_s: float = 10.0


@dataclass
class Session:
    wire: KafkaWire
    listener: str
    state: State
    open: bool = True

    def close(self) -> None:
        self.open = False
        self.wire.close()


@dataclass
class CaseContext:
    rng: random.Random
    session: Session
    creds: Credentials
    limits: Limits

    @property
    def wire(self) -> KafkaWire:
        return self.session.wire

    async def request(self, body: Message, version: int) -> Message:
        try:
            return await self.wire.request(body, version, self.limits.answer_timeout_s)
        except Closed as exc:
            raise FuzzFailure(f"{type(body).__name__} v{version} was not answered ({exc})") from None
        except TimeoutError:
            raise FuzzFailure(f"{type(body).__name__} v{version}: no answer in {self.limits.answer_timeout_s}s") from None

    async def expect_close(self, why: str) -> str:
        if not await self.wire.closed_by_broker(self.limits.close_timeout_s):
            raise FuzzFailure(f"the broker kept the connection open after {why}")
        self.session.close()
        return "closed-by-broker"

    async def give_up(self) -> str:
        """Stop here: read for a moment (so a close or answer may cross ours), then drop the connection."""
        if self.rng.random() < 0.5:
            await self.wire.linger(self.rng.choice((0.0, 0.001, 0.01, 0.05)))
        self.session.close()
        return "closed-by-client"


Case = Callable[[CaseContext], Awaitable[str]]


# -- frames -------------------------------------------------------------------------------------
def size_prefix(rng: random.Random, kind: str, limits: Limits) -> bytes:
    if kind == "negative":
        size = rng.choice((-1, -4, -(2**31), rng.randint(-(2**31), -1)))
    elif kind == "zero":
        size = 0
    elif kind == "huge":
        size = rng.choice((limits.max_request_size + 1, 2**31 - 1, rng.randint(limits.max_request_size + 1, 2**31 - 1)))
    else:
        size = rng.randint(limits.sasl_max_receive + 1, limits.max_request_size)
    return struct.pack(">i", size)


def valid_frame(ctx: CaseContext) -> bytes:
    """A request a client might send around authentication, well formed. Other APIs' requests (with
    random bodies) only before authentication, where they are refused unread: after it they would be
    served, and this fuzzer is about the handshake, not about every handler."""
    rng, wire = ctx.rng, ctx.wire
    choice = rng.randrange(5 if ctx.session.state is State.FRESH else 4)
    if choice == 0:
        return wire.frame(ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"),
                          rng.randint(0, 4))
    if choice == 1:
        return wire.frame(SaslHandshakeRequest(mechanism=rng.choice(ENABLED_MECHANISMS)), rng.randint(0, 1))
    if choice == 2:
        token = plain_token(rng, ctx.creds)[0] if rng.random() < 0.5 else scram_client_first(rng, ctx.creds).token
        return wire.frame(SaslAuthenticateRequest(auth_bytes=token), rng.randint(0, 2))
    if choice == 3:
        return wire.frame(MetadataRequest(topics=[]), rng.randint(0, 12))
    return other_api_frame(rng)


def other_api_frame(rng: random.Random) -> bytes:
    """A request header of an API other than the SASL ones (or of no API at all), with a random body."""
    keys = [key for key in APIS if key not in SASL_KEYS]
    key = rng.choice(keys) if rng.random() < 0.9 else rng.choice((-1, 9999, 32767, -32768))
    version = rng.randint(0, 15) if rng.random() < 0.9 else rng.randint(-32768, 32767)
    client_id = random_text(rng, 10).encode()[:100]
    header = struct.pack(">hhih", key, version, rng.randint(0, 2**31 - 1), len(client_id)) + client_id
    body = header + random_bytes(rng, 200)
    return struct.pack(">i", len(body)) + body


def authenticated_garbage(rng: random.Random, data: bytes, limits: Limits) -> bytes:
    """``data`` with a size prefix no authenticated connection would act on: a client past
    authentication may announce any frame up to socket.request.max.bytes, and the broker then
    rightly holds that much for it; the fuzzer does not make it do so thousands of times."""
    if len(data) >= 4 and 65536 < struct.unpack_from(">i", data)[0] <= limits.max_request_size:
        return bytes([data[0] | 0x80]) + data[1:]  # now negative
    return data


# -- cases on any session ---------------------------------------------------------------------------
async def random_bytes_case(ctx: CaseContext) -> str:
    data = random_bytes(ctx.rng, 4096)
    if ctx.session.state is State.AUTHENTICATED:
        data = authenticated_garbage(ctx.rng, data, ctx.limits)
    await send_or_closed(ctx, data)
    return await ctx.give_up()


async def truncated_frame_case(ctx: CaseContext) -> str:
    frames = b"".join(valid_frame(ctx) for _ in range(ctx.rng.randint(1, 3)))
    await send_or_closed(ctx, truncated(ctx.rng, frames))
    return await ctx.give_up()


async def bad_size_case(ctx: CaseContext) -> str:
    kind = ctx.rng.choice(BAD_SIZES if ctx.session.state is State.FRESH else BAD_SIZES[:3])
    data = size_prefix(ctx.rng, kind, ctx.limits) + random_bytes(ctx.rng, 64)
    if not await send_or_closed(ctx, data):
        return "closed-by-broker"
    # Every one of these is refused at once: no frame is waited for.
    return await ctx.expect_close(f"a frame size of {struct.unpack_from('>i', data)[0]}")


async def versions_case(ctx: CaseContext) -> str:
    """ApiVersions at any version: served (KIP-511: a version too new is answered v0), the connection kept."""
    rng = ctx.rng
    version = rng.randint(0, 4) if rng.random() < 0.8 else rng.randint(5, 100)
    if version > 4:
        return await _too_new_versions(ctx, version)
    # Software names outside KIP-511's alphabet are answered INVALID_REQUEST (v3+), the connection kept.
    name = "pafka-fuzz" if rng.random() < 0.5 else random_text(rng, 20)
    response = await ctx.request(ApiVersionsRequest(client_software_name=name, client_software_version="1.0"),
                                 version)
    assert isinstance(response, ApiVersionsResponse)
    if response.error_code == ErrorCode.NO_ERROR and response.api_keys:
        return "answered"
    if response.error_code == ErrorCode.INVALID_REQUEST and version >= 3 and name != "pafka-fuzz":
        return "answered"
    raise FuzzFailure(f"ApiVersions v{version} ({name!r}) answered error {response.error_code}")


async def _too_new_versions(ctx: CaseContext, version: int) -> str:
    frame = ctx.wire.frame(ApiVersionsRequest(), 0)
    if not await send_or_closed(ctx, _with_version(frame, version)):
        raise FuzzFailure(f"the connection was closed before ApiVersions v{version}")
    try:
        response = await ctx.wire.response(ApiVersionsRequest.API_KEY, 0, ctx.limits.answer_timeout_s)
    except (Closed, TimeoutError) as exc:
        raise FuzzFailure(f"ApiVersions v{version} was not answered v0 ({exc!r})") from None
    assert isinstance(response, ApiVersionsResponse)
    if response.error_code != ErrorCode.UNSUPPORTED_VERSION:
        raise FuzzFailure(f"ApiVersions v{version} answered error {response.error_code}")
    return "answered"


def _with_version(frame: bytes, version: int) -> bytes:
    # An ApiVersions v0 body is empty: only the header's version changes.
    return frame[:6] + struct.pack(">h", version) + frame[8:]


async def other_api_case(ctx: CaseContext) -> str:
    """Before authentication any request but the SASL ones closes the connection."""
    frame = other_api_frame(ctx.rng) if ctx.rng.random() < 0.7 else ctx.wire.frame(MetadataRequest(topics=[]), 1)
    if not await send_or_closed(ctx, frame):
        return "closed-by-broker"
    return await ctx.expect_close("a request before authentication")


async def burst_case(ctx: CaseContext) -> str:
    """Several frames (valid, fuzzed, bare tokens, garbage) in one stream, cut into random writes.
    Mutated frames and random bytes only before authentication (see :func:`valid_frame` and
    :func:`authenticated_garbage`)."""
    rng = ctx.rng
    fresh = ctx.session.state is State.FRESH
    parts = []
    for _ in range(rng.randint(2, 8)):
        pick = rng.randrange(4 if fresh else 2)
        if pick == 0:
            parts.append(valid_frame(ctx))
        elif pick == 1:
            token = plain_token(rng, ctx.creds)[0]
            parts.append(struct.pack(">i", len(token)) + token)
        elif pick == 2:
            parts.append(mutated(rng, valid_frame(ctx)))
        else:
            parts.append(random_bytes(rng, 200))
    stream = b"".join(parts)
    pos = 0
    while pos < len(stream):
        step = rng.randint(1, max(1, len(stream) - pos))
        if not await send_or_closed(ctx, stream[pos : pos + step]):
            return "closed-by-broker"
        pos += step
        if rng.random() < 0.3:
            await asyncio.sleep(0)
    return await ctx.give_up()


async def send_or_closed(ctx: CaseContext, data: bytes) -> bool:
    """Send; False (and the session closed) if the broker has already closed the connection."""
    try:
        await ctx.wire.channel.send(data)
        return True
    except Closed:
        ctx.session.close()
        return False


# -- SASL before authentication --------------------------------------------------------------------
async def unsupported_mechanism_case(ctx: CaseContext) -> str:
    version = ctx.rng.randint(0, 1)
    response = await ctx.request(SaslHandshakeRequest(mechanism=unsupported_mechanism(ctx.rng)), version)
    assert isinstance(response, SaslHandshakeResponse)
    if response.error_code != ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        raise FuzzFailure(f"an unsupported mechanism was answered error {response.error_code}")
    return await ctx.expect_close("an unsupported mechanism")


async def handshake(ctx: CaseContext, mechanism: str, version: int) -> None:
    response = await ctx.request(SaslHandshakeRequest(mechanism=mechanism), version)
    assert isinstance(response, SaslHandshakeResponse)
    if response.error_code != ErrorCode.NO_ERROR:
        raise FuzzFailure(f"SaslHandshake v{version} {mechanism} answered error {response.error_code}")


async def authenticate(ctx: CaseContext, token: bytes, expect: Expect, raw: bool) -> bytes | None:
    """Send one token (a SaslAuthenticate request, or bare after a v0 handshake); the server's next
    token, or None once the failure was answered and the connection closed."""
    if raw:
        return await _raw_token(ctx, token, expect)
    version = ctx.rng.randint(0, 2)
    response = await ctx.request(SaslAuthenticateRequest(auth_bytes=token), version)
    assert isinstance(response, SaslAuthenticateResponse)
    if response.error_code == ErrorCode.NO_ERROR and expect is not Expect.FAIL:
        return response.auth_bytes
    if response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and expect is not Expect.OK:
        await ctx.expect_close("a failed authentication")
        return None
    raise FuzzFailure(f"SaslAuthenticate v{version} answered error {response.error_code} "
                      f"({response.error_message!r}) where {expect.value} was expected")


async def _raw_token(ctx: CaseContext, token: bytes, expect: Expect) -> bytes | None:
    try:
        answer = await ctx.wire.token(token, ctx.limits.answer_timeout_s)
    except Closed:
        if expect is Expect.OK:
            raise FuzzFailure("a valid bare token was not answered") from None
        ctx.session.close()
        return None
    except TimeoutError:
        raise FuzzFailure("a bare token was neither answered nor refused") from None
    if expect is Expect.FAIL:
        raise FuzzFailure("an invalid bare token was answered")
    return answer


async def plain_case(ctx: CaseContext) -> str:
    raw = ctx.rng.random() < 0.3
    await handshake(ctx, "PLAIN", 0 if raw else 1)
    if ctx.rng.random() < 0.1:  # the token's frame cut short, then gone
        token = plain_token(ctx.rng, ctx.creds)[0]
        frame = (struct.pack(">i", len(token)) + token if raw
                 else ctx.wire.frame(SaslAuthenticateRequest(auth_bytes=token), ctx.rng.randint(0, 2)))
        await send_or_closed(ctx, truncated(ctx.rng, frame))
        return await ctx.give_up()
    token, expect = plain_token(ctx.rng, ctx.creds)
    answer = await authenticate(ctx, token, expect, raw)
    if answer is None:
        return "closed-by-broker"
    if answer != b"":
        raise FuzzFailure(f"PLAIN answered a token of {len(answer)} bytes")
    return await became_authenticated(ctx)


async def scram_case(ctx: CaseContext) -> str:
    rng = ctx.rng
    mechanism = rng.choice(list(ScramMechanism))
    raw = rng.random() < 0.3
    await handshake(ctx, mechanism.mechanism_name, 0 if raw else 1)
    first = scram_client_first(rng, ctx.creds)
    server_first = await authenticate(ctx, first.token, first.expect, raw)
    if server_first is None:
        return "closed-by-broker"
    if first.expect is not Expect.OK:
        # A mangled client-first that still parsed: whatever follows is noise.
        answer = await authenticate(ctx, random_bytes(rng, 200), Expect.ANY, raw)
        return "closed-by-broker" if answer is None else await ctx.give_up()
    check_server_first(server_first, first)
    return await scram_final_step(ctx, mechanism, first, server_first.decode(), raw)


def check_server_first(server_first: bytes, first: ScramFirst) -> None:
    text = server_first.decode("utf-8", "replace")
    if not text.startswith(f"r={first.client_nonce}") or ",s=" not in text or ",i=" not in text:
        raise FuzzFailure(f"a server-first message that does not extend the client's nonce: {text[:80]!r}")


async def scram_final_step(ctx: CaseContext, mechanism: ScramMechanism, first: ScramFirst, server_first: str,
                           raw: bool) -> str:
    if ctx.rng.random() < 0.1:  # the client-final frame cut short, then gone
        final = scram_client_final(ctx.rng, mechanism, ctx.creds, first, server_first)[0]
        frame = (struct.pack(">i", len(final)) + final if raw
                 else ctx.wire.frame(SaslAuthenticateRequest(auth_bytes=final), ctx.rng.randint(0, 2)))
        await send_or_closed(ctx, truncated(ctx.rng, frame))
        return await ctx.give_up()
    final, expect = scram_client_final(ctx.rng, mechanism, ctx.creds, first, server_first)
    server_final = await authenticate(ctx, final, expect, raw)
    if server_final is None:
        return "closed-by-broker"
    if not server_final.startswith(b"v="):
        raise FuzzFailure(f"a server-final message without a signature: {server_final[:80]!r}")
    return await became_authenticated(ctx)


async def became_authenticated(ctx: CaseContext) -> str:
    """Authentication succeeded: the connection must now serve other requests."""
    ctx.session.state = State.AUTHENTICATED
    response = await ctx.request(MetadataRequest(topics=[]), 1)
    assert isinstance(response, MetadataResponse)
    if not response.brokers:
        raise FuzzFailure("Metadata after authentication listed no broker")
    return "answered"


async def early_failure_case(ctx: CaseContext) -> str:
    """Close with a failed authentication in flight: the broker is muted, waiting out the delay."""
    await handshake(ctx, "PLAIN", 1)
    await ctx.wire.channel.send(ctx.wire.frame(SaslAuthenticateRequest(auth_bytes=b"\0nobody\0nothing"), 2))
    return await ctx.give_up()


# -- after authentication ---------------------------------------------------------------------------
async def metadata_case(ctx: CaseContext) -> str:
    version = ctx.rng.randint(0, 12)
    response = await ctx.request(MetadataRequest(topics=[]), version)
    assert isinstance(response, MetadataResponse)
    if not response.brokers:
        raise FuzzFailure(f"Metadata v{version} listed no broker")
    return "answered"


async def sasl_again_case(ctx: CaseContext) -> str:
    """SASL requests on an authenticated connection (or an SSL listener): ILLEGAL_SASL_STATE, kept open."""
    if ctx.rng.random() < 0.5:
        body: Message = SaslHandshakeRequest(mechanism=ctx.rng.choice(ENABLED_MECHANISMS))
        version = ctx.rng.randint(0, 1)
    else:
        body = SaslAuthenticateRequest(auth_bytes=random_bytes(ctx.rng, 100))
        version = ctx.rng.randint(0, 2)
    response = await ctx.request(body, version)
    error = getattr(response, "error_code", None)
    if error != ErrorCode.ILLEGAL_SASL_STATE:
        raise FuzzFailure(f"{type(body).__name__} v{version} after authentication answered error {error}")
    return "answered"


#: What a case may do, by the session's state, and how often.
CASES: dict[State, dict[str, tuple[Case, int]]] = {
    State.FRESH: {
        "random-bytes": (random_bytes_case, 8),
        "truncated-frame": (truncated_frame_case, 8),
        "bad-size": (bad_size_case, 6),
        "api-versions": (versions_case, 6),
        "unsupported-mechanism": (unsupported_mechanism_case, 6),
        "plain": (plain_case, 14),
        "scram": (scram_case, 18),
        "early-close": (early_failure_case, 3),
        "other-api": (other_api_case, 6),
        "burst": (burst_case, 8),
    },
    State.AUTHENTICATED: {
        "random-bytes": (random_bytes_case, 3),
        "truncated-frame": (truncated_frame_case, 3),
        "bad-size": (bad_size_case, 2),
        "api-versions": (versions_case, 4),
        "metadata": (metadata_case, 4),
        "sasl-again": (sasl_again_case, 6),
        "burst": (burst_case, 3),
    },
}


def pick_case(rng: random.Random, state: State) -> tuple[str, Case]:
    table = CASES[state]
    name = rng.choices(list(table), weights=[weight for _, weight in table.values()])[0]
    return name, table[name][0]
