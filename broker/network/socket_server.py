"""Listeners and connections: frames in, handlers called, responses out in order.

Kafka's SocketServer guarantees that responses leave a connection in request
order, while clients pipeline many requests. Here every decoded request takes a
slot in the connection's queue the moment it arrives; a handler may finish at
once (most do) or later (a long-polling fetch, a produce waiting for a flush),
and the queue is drained from its head only, so a slow request holds back the
ones behind it exactly as in Kafka.

Received bytes land where the decoder says (``asyncio.BufferedProtocol``):
straight into a large request's own buffer, so produced batches are not copied
in user space on their way to disk. Responses that become ready while one read
is being handled leave in one write; record bytes leave by sendfile (see
``broker.network.response_writer``).

A listener mapped to SSL (or SASL_SSL) serves TLS through the event loop's SSL
transport, which owns the bytes on the wire: its connections never sendfile,
their record bytes are read from the segment and written through TLS (see
``broker.network.response_writer``). Each connection knows its client's principal
(``broker.security.channel_builders``) for the request context. On a SASL
listener that principal comes from SASL authentication, and until it completes
only ApiVersions, SaslHandshake and SaslAuthenticate are handled
(``broker.security.sasl_authenticator``), in frames of at most
``sasl.server.max.receive.size``: a larger size prefix fails the authentication.

Each listener accepts through its ``broker.network.acceptor.Acceptor``, within the broker's
connection limits (``broker.network.connection_quotas``); a connection gives its slot back as it
closes.

A request runs to its end even if its connection closes first, its answer
dropped, as in Kafka: a handler cut off between two writes leaves state half
changed (a transaction prepared with no markers sent, an ACL on disk but not in
force). Only requests whose remaining work is waiting are cancelled with their
connection (``CANCELLED_WITH_THE_CONNECTION``: a long-polling fetch, a produce
waiting for its acks, a member waiting for its group).

Memory stays bounded (``broker.network.request_limits``): a request's bytes count in the
request memory pool (``queued.max.request.bytes``) until it is answered, and while the pool
is exhausted, or ``queued.max.requests`` requests wait for their handler, no connection reads.
A client that does not read its socket stops being read once its unsent responses pass
WRITE_HIGH_WATER: its next requests wait in its own socket, not in the broker.

Bad input never takes the broker down: an undecodable frame closes that one
connection (logged once), an unsupported ApiVersions version is answered as
Kafka answers it, and a handler that raises closes only its own connection.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import inspect
import logging
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from broker.network.acceptor import Acceptor, listening_sockets
from broker.network.connection_quotas import ConnectionQuotas, ConnectionSlot
from broker.network.request_limits import MemoryPool, RequestQueue
from broker.network.request_metrics import FETCH_CONSUMER_KEY, FETCH_FOLLOWER_KEY, RequestMetrics
from broker.network.response_writer import ResponseWriter
from broker.request_context import RequestContext
from broker.security.channel_builders import ListenerSecurity
from broker.security.credential_cache import CredentialCache
from broker.security.kafka_principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from broker.security.sasl_authenticator import (
    SASL_HANDSHAKE_KEY,
    SaslServerAuthenticator,
    SaslState,
    client_message,
)
from broker.security.sasl_server import SaslError
from protocol.api import API_VERSIONS_KEY, decode_request, encode_response
from protocol.buffers import Chunk
from protocol.errors import ProtocolError
from protocol.framing import SCRATCH_SIZE, FrameDecoder, FrameSizeError
from protocol.messages.fetch import API_KEY as FETCH_KEY
from protocol.messages.join_group import API_KEY as JOIN_GROUP_KEY
from protocol.messages.produce import API_KEY as PRODUCE_KEY
from protocol.messages.sync_group import API_KEY as SYNC_GROUP_KEY
from protocol.primitives import Message, UnsupportedVersionError

if TYPE_CHECKING:
    from broker.config.broker_config import Listener

log = logging.getLogger(__name__)

#: Stop reading from a client whose unsent responses exceed this; Kafka mutes
#: a channel while a response is in flight for the same reason.
WRITE_HIGH_WATER = 8 << 20
#: Requests decoded but not yet answered before we stop reading more.
MAX_IN_FLIGHT = 1000
#: Requests whose remaining work, once their handler awaits, is only waiting (for records, for
#: acks, for the group): a closed connection cancels them. Every other request runs to its end.
CANCELLED_WITH_THE_CONNECTION = frozenset({FETCH_KEY, PRODUCE_KEY, JOIN_GROUP_KEY, SYNC_GROUP_KEY})


#: A handler returns the response body, None for "no response" (acks=0
#: produce), or an awaitable of either.
Dispatch = Callable[[RequestContext], Any]


@dataclass(slots=True)
class _Slot:
    api_key: int
    api_version: int
    correlation_id: int
    response: Any = None
    done: bool = False
    no_response: bool = False
    frame: Any = field(default=None)  # keeps records memoryviews alive
    #: A bare SASL token (after a v0 SaslHandshake): sent size-prefixed, without a response header.
    raw: bool = False
    #: perf_counter() when the request arrived, its handler started, its handler returned (an awaitable
    #: or the answer) and its answer was ready: Kafka's RequestMetrics times.
    received: float = 0.0
    dispatched: float = 0.0
    returned: float = 0.0
    completed: float = 0.0
    #: A fetch's kind (consumer or follower) for the request metrics; 0 for other APIs.
    fetch_kind: int = 0
    #: Bytes this request holds in the request memory pool until it is answered.
    pooled: int = 0


def _record(metrics: RequestMetrics, slots: list[_Slot], sent: float) -> None:
    """Each answered request's count, error and times (a handler's own await is its remote time)."""
    for slot in slots:
        if slot.raw:
            continue
        received, dispatched, returned, completed = slot.received, slot.dispatched, slot.returned, slot.completed
        if returned < dispatched:  # dispatched in turn: its whole run is the handler's own time
            returned = completed
        response = slot.response
        metrics.record(slot.api_key, slot.api_version, response,
                       (dispatched - received, returned - dispatched, completed - returned,
                        (completed if slot.no_response else sent) - completed, sent - received,
                        getattr(response, "throttle_time_ms", 0) or 0),
                       slot.fetch_kind)


def _fetch_kind(body: Any, version: int) -> int:
    replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
    return FETCH_FOLLOWER_KEY if replica_id >= 0 else FETCH_CONSUMER_KEY


def _is_awaitable(result: Any) -> TypeGuard[Awaitable[Any]]:
    # A response body (or None) is the common case; inspect.isawaitable's ABC
    # check cost ~3% of the broker's time under small produce requests.
    return result is not None and not isinstance(result, Message) and inspect.isawaitable(result)


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection: framing, pipelining and ordered responses."""

    def __init__(self, server: SocketServer, listener_name: str, security: ListenerSecurity) -> None:
        self._server = server
        self._listener_name = listener_name
        self._security = security
        self.principal: KafkaPrincipal = ANONYMOUS
        self._decoder = FrameDecoder(server.max_request_size, server.receive_scratch)
        self._writer: ResponseWriter | None = None
        self._corked = False  # handling one read: responses wait for its end
        self._flush_scheduled = False
        self._slots: collections.deque[_Slot] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._reading_paused = False
        #: Muted for a client quota until this loop time (KIP-219); 0.0: not throttled.
        self._throttled_until = 0.0
        self._unthrottle: asyncio.TimerHandle | None = None
        self._writing_paused = False
        self.peer: str = "?"
        #: The client's IP address, as an ACL's host names it.
        self.client_host: str = "?"
        self._sock_fd: int | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: The requests among ``_tasks`` that run to their end if the connection closes first.
        self._runs_to_end: set[asyncio.Task[Any]] = set()
        self._close_when_answered = False
        #: None on a listener without SASL.
        self.sasl = (SaslServerAuthenticator(security.sasl, server.credentials)
                     if security.sasl is not None else None)
        #: Its place in the connection quotas, given back when it closes (broker.network.connection_quotas).
        self.slot: ConnectionSlot | None = None
        #: When it last received bytes: the least recently used is closed first to make room.
        self.last_active = time.monotonic()
        if self.sasl is not None:
            # Kafka's sasl.server.max.receive.size: a client that has not authenticated may not
            # make the broker allocate socket.request.max.bytes for a frame it merely announces.
            self._decoder.max_frame_size = min(server.sasl_max_receive_size, server.max_request_size)
            self._decoder.limit_name = "sasl.server.max.receive.size"

    # -- asyncio.Protocol -------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream server's transport is a Transport (uvloop's implement it without subclassing).
        self._transport = tcp = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = str(peer[0]) if peer else "?"
        sock = transport.get_extra_info("socket")
        ssl_object = transport.get_extra_info("ssl_object")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            # Over TLS the socket carries records only once encrypted: no sendfile on it.
            self._sock_fd = sock.fileno() if ssl_object is None else None
        tcp.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self._writer = ResponseWriter(tcp, self._sock_fd, self._update_reading, self._write_failed)
        self._server.connections.add(self)
        self._update_reading()  # a client accepted while the broker's limits are reached waits too
        if ssl_object is not None:
            self._authenticate(ssl_object)

    def _authenticate(self, ssl_object: ssl.SSLObject) -> None:
        try:
            self.principal = self._security.principal(ssl_object)
        except ValueError as exc:  # no mapping rule applies to its subject: not authenticated, as in Kafka
            log.warning("closing connection from %s on %s: authentication failed: %s",
                        self.peer, self._listener_name, exc)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self.slot is not None:
            self.slot.release()
        if self._writer is not None:
            self._writer.close()
        self._server.connections.discard(self)
        if self._unthrottle is not None:
            self._unthrottle.cancel()
        self.release_tasks()
        for slot in self._slots:
            self._release_pooled(slot)
        self._slots.clear()
        self._server.blocked.discard(self)

    def release_tasks(self) -> None:
        """The connection is gone: cancel what only waits, hand the rest to the server to finish."""
        for task in self._tasks:
            if task in self._runs_to_end:
                self._server.adopt(task)
            else:
                task.cancel()
        self._tasks.clear()
        self._runs_to_end.clear()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.recv_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        try:
            frames = self._decoder.received(nbytes)
        except FrameSizeError as exc:
            if self.sasl is not None and not self.sasl.complete:
                self._invalid_receive(exc)
            else:
                self._bad_input(exc)
            return
        except ProtocolError as exc:
            self._bad_input(exc)
            return
        if not frames:
            return
        self._corked = True  # answers to this read's requests go out in one write
        try:
            for frame in frames:
                if self._closed:
                    return
                self._on_frame(frame)
        finally:
            self._corked = False
        self._flush_ready()

    # -- requests ---------------------------------------------------------
    def _on_frame(self, frame: memoryview) -> None:
        sasl = self.sasl
        if sasl is not None and not sasl.complete:
            if sasl.state is SaslState.FAILED:
                return  # muted until its delayed close
            if sasl.raw_tokens:
                self._on_raw_token(sasl, frame)
                return
        try:
            request = decode_request(frame)
        except UnsupportedVersionError as exc:
            self._unsupported_version(exc)
            return
        except ProtocolError as exc:
            self._bad_input(exc)
            return
        header = request.header
        if sasl is not None:
            refusal = (sasl.refusal(header.request_api_key, request.api.name) if not sasl.complete
                       else self._expired_session(sasl, header.request_api_key))
            if refusal is not None:
                log.info("closing connection from %s on %s: %s", self.peer, self._listener_name, refusal)
                self.close()
                return
        now = time.perf_counter()
        slot = _Slot(header.request_api_key, header.request_api_version, header.correlation_id, frame=frame,
                     received=now, dispatched=now, pooled=len(frame))
        self._server.memory_pool.allocate(len(frame))
        if slot.api_key == FETCH_KEY:
            slot.fetch_kind = _fetch_kind(request.body, slot.api_version)
        self._slots.append(slot)
        ctx = RequestContext(request, self, self._listener_name, self.principal, len(frame))
        taken: Callable[[], None] | None = None
        try:
            if self._tasks:
                # An earlier request of this connection is still running as a task:
                # this one starts after it has, as when every handler was a task.
                taken = self._server.request_queue.put()
                result = self._dispatch_in_turn(ctx, slot, taken)
            else:
                result = self._server.dispatch(ctx)
            slot.returned = time.perf_counter()
        except Exception:
            log.exception("handler for %s v%d failed; closing %s", request.api.name, slot.api_version, self.peer)
            self.close()
            return
        if _is_awaitable(result):
            task = asyncio.ensure_future(self._finish(result, slot))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            if taken is not None:  # cancelled before it started, it still leaves the queue
                task.add_done_callback(lambda _task: taken())
            if slot.api_key not in CANCELLED_WITH_THE_CONNECTION:
                self._runs_to_end.add(task)
                task.add_done_callback(self._runs_to_end.discard)
        else:
            self._complete(slot, result)

    async def _dispatch_in_turn(self, ctx: RequestContext, slot: _Slot, taken: Callable[[], None]) -> Any:
        taken()  # its handler starts: it leaves the request queue
        slot.dispatched = time.perf_counter()
        result = self._server.dispatch(ctx)
        return (await result) if _is_awaitable(result) else result

    async def _finish(self, handling: Awaitable[Any], slot: _Slot) -> None:
        """Await a handler and complete its slot in the same step: a done callback would cost
        one more loop iteration between an answer being ready (an acks=all produce, a woken
        long poll) and its write."""
        try:
            response = await handling
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not self._closed:
                log.error("handler for api %d v%d failed; closing %s", slot.api_key, slot.api_version, self.peer,
                          exc_info=exc)
                self.close()
            return
        if not self._closed:
            self._complete(slot, response)

    # -- SASL -------------------------------------------------------------
    @staticmethod
    def _expired_session(sasl: SaslServerAuthenticator, api_key: int) -> str | None:
        """KIP-368: a session past its lifetime may only start re-authentication."""
        if sasl.session_expires_at is None or api_key == SASL_HANDSHAKE_KEY:
            return None
        if sasl.session_expired(asyncio.get_running_loop().time()):
            return "SASL session expired without re-authentication"
        return None

    def authenticated(self, authorization_id: str) -> None:
        """SASL authentication completed: later requests act as ``User:<authorization_id>``."""
        self.principal = KafkaPrincipal(USER_TYPE, authorization_id)
        self._decoder.max_frame_size = self._server.max_request_size
        self._decoder.limit_name = "socket.request.max.bytes"

    def _invalid_receive(self, exc: FrameSizeError) -> None:
        """A frame size refused before authentication fails the authentication, as Kafka's
        InvalidReceiveException does there: logged once, closed after the delay."""
        if self.sasl is not None and self.sasl.state is SaslState.FAILED:
            return  # already failed and muted: its delayed close is on its way
        delay = self.authentication_failed(f"Failing SASL authentication due to invalid receive size: {exc}")
        self._own(self._close_after(delay))

    def authentication_failed(self, reason: str) -> float:
        """Log the failure once (``reason`` holds no secret), mute the connection and return how
        long to wait (connection.failed.authentication.delay.ms, in seconds) before answering and closing."""
        if self.sasl is not None:
            self.sasl.fail()
        log.info("Failed authentication with %s on %s (%s)", self.peer, self._listener_name, reason)
        if self._transport is not None and not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        return self._server.failed_authentication_delay_s

    async def refuse_authentication(self, reason: str, response: Message) -> Message:
        """A failed authentication's answer (SaslHandshake, SaslAuthenticate): logged at once, sent
        after the delay, then the connection closes."""
        await asyncio.sleep(self.authentication_failed(reason))
        self._close_when_answered = True
        return response

    def _on_raw_token(self, sasl: SaslServerAuthenticator, frame: memoryview) -> None:
        try:
            challenge = sasl.authenticate(bytes(frame))
        except SaslError as exc:
            assert sasl.server is not None
            delay = self.authentication_failed(client_message(exc, sasl.server.mechanism))
            self._own(self._close_after(delay))  # v0 has no error response: the close says it
            return
        if sasl.complete:
            self.authenticated(sasl.authorization_id)
        # Every token is answered, an empty one too (PLAIN's), as Kafka's authenticator does.
        slot = _Slot(-1, 0, 0, raw=True)
        self._slots.append(slot)
        self._complete(slot, challenge)

    async def _close_after(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self.close()

    def _own(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _complete(self, slot: _Slot, response: Any) -> None:
        slot.completed = time.perf_counter()
        slot.response = response
        slot.no_response = response is None
        slot.done = True
        slot.frame = None
        self._release_pooled(slot)
        if self._corked:
            return
        if self._slots and slot is self._slots[-1]:
            # Nothing was asked after it: no other answer can join this write, so it goes now
            # rather than an iteration later (with every earlier answer that is ready).
            self._flush_ready()
        elif not self._flush_scheduled:
            # Handlers finishing in the same loop iteration share one write.
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_ready)

    def _release_pooled(self, slot: _Slot) -> None:
        if slot.pooled:
            pooled, slot.pooled = slot.pooled, 0
            self._server.memory_pool.release(pooled)

    def _flush_ready(self) -> None:
        self._flush_scheduled = False
        writer = self._writer
        chunks: list[Chunk] = []
        answered: list[_Slot] = []
        unreadable: OSError | None = None
        while self._slots and self._slots[0].done and not self._closed:
            slot = self._slots.popleft()
            answered.append(slot)
            if slot.no_response:
                continue
            try:
                frame = (encode_response(slot.api_key, slot.api_version, slot.correlation_id, slot.response)
                         if not slot.raw else [struct.pack(">i", len(slot.response)) + slot.response])
            except ProtocolError:
                log.exception("cannot encode the response to api %d v%d", slot.api_key, slot.api_version)
                self.close()
                return
            assert writer is not None
            try:
                chunks += writer.prepare(frame)
            except OSError as exc:  # its segment is gone: answers before it still go out
                unreadable = exc
                break
        if chunks and not self._closed:
            assert writer is not None
            try:
                writer.write(chunks)
            except OSError as exc:
                self._write_failed(exc)
                return
        if answered:
            _record(self._server.request_metrics, answered, time.perf_counter())
        if unreadable is not None:
            log.error("cannot send records to %s: %s; closing the connection", self.peer, unreadable)
            self._closed = True
            assert writer is not None
            writer.close_when_sent()
            return
        if self._close_when_answered and not self._slots and not self._closed:
            self._closed = True
            assert writer is not None
            writer.close_when_sent()
            return
        self._update_reading()

    def _write_failed(self, exc: OSError) -> None:
        log.error("cannot send records to %s: %s; closing the connection", self.peer, exc)
        self.close()

    def _unsupported_version(self, exc: UnsupportedVersionError) -> None:
        if exc.api_key == API_VERSIONS_KEY and exc.correlation_id is not None:
            # KIP-511: a client newer than us learns our versions from a v0 reply.
            slot = _Slot(API_VERSIONS_KEY, 0, exc.correlation_id)
            self._slots.append(slot)
            self._complete(slot, self._server.unsupported_api_versions_response())
            if not self._corked:
                self._flush_ready()
            return
        self._bad_input(exc)

    def _bad_input(self, exc: ProtocolError) -> None:
        log.warning("closing connection from %s: %s", self.peer, exc)
        self.close()

    # -- flow control -----------------------------------------------------
    def throttle(self, delay_ms: int) -> None:
        """A client over its quota: read nothing more from it for ``delay_ms`` (Kafka mutes the channel)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + delay_ms / 1000.0
        if until <= self._throttled_until or self._closed:
            return
        self._throttled_until = until
        if self._unthrottle is not None:
            self._unthrottle.cancel()
        self._unthrottle = loop.call_at(until, self._end_throttle)
        self._update_reading()

    def _end_throttle(self) -> None:
        self._unthrottle = None
        self._throttled_until = 0.0
        self._update_reading()

    def update_reading(self) -> None:
        """Pause or resume reading from the client, as its backlog, its quota and the broker's limits say."""
        self._update_reading()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closed:
            return
        backlog = self._writer.backlog if self._writer is not None else 0
        blocked = self._server.reading_blocked
        if blocked:
            self._server.blocked.add(self)
        should_pause = (self._writing_paused or len(self._slots) >= MAX_IN_FLIGHT or backlog > WRITE_HIGH_WATER
                        or self._unthrottle is not None or blocked)
        if should_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.slot is not None:  # Kafka's processor frees the slot as it closes the channel
            self.slot.release()
        if self._writer is not None:
            self._writer.close()
        if self._transport is not None:
            self._transport.close()

    @property
    def listener_name(self) -> str:
        return self._listener_name

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def idle(self) -> bool:
        return not self._slots and (self._writer is None or self._writer.backlog == 0)


class SocketServer:
    """The broker's listeners and the set of live connections."""

    def __init__(
        self,
        dispatch: Dispatch,
        unsupported_api_versions_response: Callable[[], Any],
        max_request_size: int,
        credentials: CredentialCache | None = None,
        failed_authentication_delay_ms: int = 100,
        connection_quotas: ConnectionQuotas | None = None,
        sasl_max_receive_size: int = 524288,
        limits: tuple[MemoryPool, RequestQueue] | None = None,
    ) -> None:
        self.dispatch = dispatch
        #: The SCRAM credentials SASL connections authenticate against.
        self.credentials = credentials if credentials is not None else CredentialCache()
        self.failed_authentication_delay_s = failed_authentication_delay_ms / 1000
        self.unsupported_api_versions_response = unsupported_api_versions_response
        self.max_request_size = max_request_size
        #: sasl.server.max.receive.size: the frame limit on a SASL listener until authentication.
        self.sasl_max_receive_size = sasl_max_receive_size
        #: Every connection reads small requests into this one buffer (all run on
        #: one event loop, and nothing stays in it between reads): idle connections
        #: cost no receive buffer of their own.
        self.receive_scratch = bytearray(SCRATCH_SIZE)
        self.connections: set[KafkaConnection] = set()
        #: queued.max.request.bytes and queued.max.requests (unbounded and Kafka's 500 unless given).
        self.memory_pool, self.request_queue = limits if limits is not None else (MemoryPool(-1), RequestQueue(500))
        self.memory_pool.on_available = self.request_queue.on_available = self._resume_blocked
        #: Connections that stopped reading while the pool was exhausted or the queue full.
        self.blocked: set[KafkaConnection] = set()
        #: Connection limits (unlimited unless the broker's configuration sets them).
        self.connection_quotas = connection_quotas if connection_quotas is not None else ConnectionQuotas()
        self.connection_quotas.close_least_recently_used = self._close_least_recently_used
        self._acceptors: list[Acceptor] = []
        self.bound: dict[str, tuple[str, int]] = {}
        #: Kafka's RequestMetrics (read by the broker's metrics).
        self.request_metrics = RequestMetrics()
        #: Requests still running after their connection closed (see the module's docstring).
        self._orphans: set[asyncio.Task[Any]] = set()

    @property
    def reading_blocked(self) -> bool:
        """No connection reads while the request memory pool is exhausted or the request queue full."""
        return self.memory_pool.out_of_memory or self.request_queue.full

    def _resume_blocked(self) -> None:
        if self.reading_blocked:
            return
        blocked, self.blocked = self.blocked, set()
        for connection in blocked:
            connection.update_reading()

    def adopt(self, task: asyncio.Task[Any]) -> None:
        """A request whose connection closed runs on here; shutdown waits for it, then cancels it."""
        self._orphans.add(task)
        task.add_done_callback(self._orphans.discard)

    async def start(self, listeners: list[Listener], security: Mapping[str, ListenerSecurity] | None = None) -> None:
        """Bind every listener; ``security`` (by listener name) says which serve TLS (default: none)."""
        self.connection_quotas.bind_loop(asyncio.get_running_loop())
        for listener in listeners:
            served = (security or {}).get(listener.name) or ListenerSecurity("PLAINTEXT")
            sockets = await listening_sockets(listener.host, listener.port, backlog=1024)
            acceptor = Acceptor(listener.name, sockets, self.connection_quotas,
                                functools.partial(self._connection, listener.name, served),
                                served.ssl_context)
            self._acceptors.append(acceptor)
            acceptor.start()
            host, port = sockets[0].getsockname()[:2]
            self.bound[listener.name] = (host, port)
            log.info("listening on %s://%s:%d (%s)", listener.name, host, port, served.security_protocol)

    def _connection(self, listener_name: str, security: ListenerSecurity, slot: ConnectionSlot) -> KafkaConnection:
        connection = KafkaConnection(self, listener_name, security)
        connection.slot = slot
        return connection

    def _close_least_recently_used(self, protected_listener: str) -> bool:
        """Make room for a protected listener's connection (Kafka's lowestPriorityChannel)."""
        candidates = [c for c in self.connections if c.listener_name != protected_listener and not c.closed]
        if not candidates:
            return False
        victim = min(candidates, key=lambda c: c.last_active)
        log.info("closing the least recently used connection %s on %s: max.connections reached",
                 victim.peer, victim.listener_name)
        victim.close()
        return True

    def stop_accepting(self) -> None:
        for acceptor in self._acceptors:
            acceptor.close()

    async def drain(self, timeout: float) -> None:
        """Let in-flight requests finish (bounded), then close every connection."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Polled, once, at shutdown: an event would need every connection to signal
        # each time it goes idle, on the response path that runs for every request.
        while ((self._orphans or any(not c.idle for c in self.connections))  # noqa: ASYNC110
               and loop.time() < deadline):
            await asyncio.sleep(0.01)
        for connection in list(self.connections):
            connection.close()
            connection.release_tasks()
        for task in list(self._orphans):
            task.cancel()
        await asyncio.gather(*self._orphans, return_exceptions=True)
        for acceptor in self._acceptors:
            await acceptor.wait_closed()
