"""A ZooKeeper session for asyncio over kazoo: the thread, retries, watches (base of KafkaZkClient).

Every kazoo call runs on ONE dedicated thread (``kafka-zk``), so the event loop never
blocks and the calls reach ZooKeeper in the order they were made. Batches are
pipelined with kazoo's async calls from that thread. kazoo's own threads only report
back: watch events and connection states hop to the dedicated thread (to re-arm a
watch) or to the event loop (to run a callback) and do nothing else.

Sessions: kazoo reconnects by itself; while disconnected a call waits for the
connection and is retried (as Kafka's retryRequestUntilConnected). A session that
expires is replaced by a new one: the ``on_session_expired`` callbacks run, then,
once the new session is up and every watch re-armed, the ``on_reconnected`` ones
(the owners re-create their ephemeral znodes there).

Writes of the controller are fenced as in Kafka 3.9: a multi-op that first checks
/controller_epoch's znode version (``_fenced_ops``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.exceptions import (
    NodeExistsError as KazooNodeExistsError,
)
from kazoo.handlers.threading import KazooTimeoutError

from controller.zk import zk_data as zd
from controller.zk.zk_watches import ZkWatch, ZkWatchKind, read_watched

log = logging.getLogger(__name__)

#: ZooKeeper request latencies kept for the quantiles (Kafka's histograms keep a 1,028-sample reservoir).
LATENCIES_KEPT = 1028

T = TypeVar("T")
TopicPartition = tuple[str, int]

#: kazoo errors after which a call is retried once the connection is back.
_RETRIABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)


class ZkError(Exception):
    """A ZooKeeper operation failed (not connected in time, closed, unexpected content)."""


class NodeExistsError(ZkError):
    """The znode already exists (another broker registered this id...)."""


class ControllerMovedError(ZkError):
    """Another broker is (or became) the controller: this broker's controller writes are refused."""


class ZkBadVersionError(ZkError):
    """A conditional write lost: the znode's version moved on (someone else wrote it first)."""


class TopicExistsError(ZkError):
    """Kafka's TopicExistsException."""


def split_connect(connect: str) -> tuple[str, str]:
    """``h1:p1,h2:p2/chroot`` -> (servers, chroot or '')."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    chroot = connect[slash:].rstrip("/")
    return connect[:slash], chroot


class ZkThread:
    """The one thread that makes every kazoo call, in submission order.

    A daemon thread (unlike a ThreadPoolExecutor's): a process that exits while a call
    waits for a ZooKeeper that is down is not held up by it.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()
        self._shutdown = False

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        if self._shutdown:
            raise RuntimeError("the ZooKeeper thread is shut down")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._jobs.put((future, fn, args))
        return future

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop after the jobs already submitted (waits up to ``timeout`` unless called on the thread itself)."""
        if self._shutdown:
            return
        self._shutdown = True
        self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as e:
                future.set_exception(e)
            else:
                future.set_result(result)


class ZooKeeperSession:
    """One ZooKeeper connection (chroot created if missing) and its session, for asyncio."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int = 18000) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._servers, self._chroot = split_connect(connect)
        self._executor = ZkThread("kafka-zk")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._zk: KazooClient | None = None
        self._closing = threading.Event()
        self._started = False
        self._session_id: int | None = None
        self._watches: list[ZkWatch] = []
        self._expired_callbacks: list[Callable[[], object]] = []
        self._reconnected_callbacks: list[Callable[[], object]] = []
        #: Kafka's SessionExpireListener and ZooKeeperClientMetrics as plain fields (the broker's metrics
        #: read them): kazoo's last connection state, the state changes, and recent request latencies.
        self.state = "CONNECTING"
        self.connects = self.disconnects = self.expires = 0
        self.requests = 0
        self.request_times_ms: collections.deque[float] = collections.deque(maxlen=LATENCIES_KEPT)

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect (within connection_timeout_ms), create the chroot if missing, then Kafka's persistent paths."""
        self._loop = asyncio.get_running_loop()
        await self._run(self._start_blocking)
        self._started = True

    def _start_blocking(self) -> None:
        timeout = self.connection_timeout_ms / 1000
        if self._chroot:
            bootstrap = KazooClient(hosts=self._servers, timeout=self.session_timeout_ms / 1000)
            try:
                self._start_kazoo(bootstrap, timeout)
                ensure_path(bootstrap, self._chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        # Reconnect attempts at most a second apart, forever (kazoo's default backs off up to an hour).
        zk = KazooClient(hosts=self.connect, timeout=self.session_timeout_ms / 1000,
                         connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0})
        zk.add_listener(self._on_state)
        self._start_kazoo(zk, timeout)
        self._zk = zk
        client_id = zk.client_id
        self._session_id = client_id[0] if client_id else None
        for path in zd.PERSISTENT_PATHS:
            self._retry(lambda p=path: ensure_path(zk, p))  # type: ignore[misc]

    @staticmethod
    def _start_kazoo(zk: KazooClient, timeout: float) -> None:
        try:
            zk.start(timeout=timeout)
        except KazooTimeoutError as e:
            zk.stop()
            zk.close()
            raise ZkError(f"Timed out waiting for connection to {zk.hosts} after {timeout:g}s") from e

    async def close(self) -> None:
        """Close the session (this broker's ephemeral znodes go at once) and the thread."""
        if self._closing.is_set():
            return
        self._closing.set()
        for watch in self._watches:
            watch.active = False
        zk = self._zk
        if zk is not None:
            await asyncio.wrap_future(self._executor.submit(_stop_kazoo, zk))
        self._executor.shutdown()

    @property
    def session_id(self) -> int | None:
        """The current session's id (a new one after an expiry)."""
        return self._session_id

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) while connected: tests use it to force this session's expiry."""
        zk = self._zk
        if zk is None:
            return None
        cid: tuple[int, bytes] | None = zk.client_id
        return cid

    def on_session_expired(self, callback: Callable[[], object]) -> None:
        """``callback()`` on the event loop when the session expired (its ephemeral znodes are gone)."""
        self._expired_callbacks.append(callback)

    def on_reconnected(self, callback: Callable[[], object]) -> None:
        """``callback()`` on the event loop once a new session replaced an expired one (re-register here)."""
        self._reconnected_callbacks.append(callback)

    # --- the dedicated thread ------------------------------------------------------------------

    async def _run(self, fn: Callable[[], T]) -> T:
        if self._closing.is_set():
            raise ZkError("the ZooKeeper client is closed")
        started = time.perf_counter()
        try:
            return await asyncio.wrap_future(self._executor.submit(fn))
        finally:
            self.requests += 1
            self.request_times_ms.append((time.perf_counter() - started) * 1000)

    @property
    def _client(self) -> KazooClient:
        if self._zk is None:
            raise ZkError("the ZooKeeper client is not started")
        return self._zk

    def _retry(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (on the dedicated thread), waiting for the connection and retrying on a connection loss."""
        while True:
            if self._closing.is_set():
                raise ZkError("the ZooKeeper client is closed")
            if not self._client.connected:
                # kazoo would queue the request until it reconnects: wait here instead, where close() is heard.
                self._wait_connected()
            try:
                return fn()
            except _RETRIABLE:
                self._wait_connected()

    def _wait_connected(self) -> None:
        """Until kazoo is connected again (it reconnects by itself); close() ends the wait."""
        while not self._client.connected:
            if self._closing.wait(0.05):
                break
        if self._closing.is_set():
            raise ZkError("the ZooKeeper client is closed")

    def _pipeline(self, calls: list[Callable[[], Any]]) -> list[Any]:
        """Issue kazoo async calls back to back, then collect: a result or the exception, per call.

        Calls that failed on a connection loss are issued again once connected.
        """
        results: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        while todo:
            if self._closing.is_set():
                raise ZkError("the ZooKeeper client is closed")
            pending = [(i, calls[i]()) for i in todo]
            todo = []
            for i, async_result in pending:
                try:
                    results[i] = async_result.get()
                except _RETRIABLE:
                    todo.append(i)
                except Exception as e:  # a per-call outcome (NoNode, BadVersion...) the caller sorts out
                    results[i] = e
            if todo:
                self._wait_connected()
        return results

    # --- kazoo's threads -------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        """kazoo's connection listener (a kazoo thread): hand everything over, never block here."""
        self._count_state(state)
        if state == KazooState.CONNECTED:
            if self._started and not self._closing.is_set():
                self._submit(self._after_connected)
        elif state == KazooState.LOST and self._started and not self._closing.is_set():
            log.warning("ZooKeeper session expired (%s)", self.connect)
            self._call_soon(self._run_callbacks, self._expired_callbacks)

    def _count_state(self, state: str) -> None:
        self.state = str(state)
        if state == KazooState.CONNECTED:
            self.connects += 1
        elif state == KazooState.SUSPENDED:
            self.disconnects += 1
        elif state == KazooState.LOST:
            self.expires += 1

    def _submit(self, fn: Callable[..., object], *args: object) -> None:
        try:
            self._executor.submit(fn, *args)
        except RuntimeError:  # the executor is shutting down: the client is closing
            pass

    def _call_soon(self, fn: Callable[..., object], *args: object) -> None:
        loop = self._loop
        if loop is None or self._closing.is_set():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed
            pass

    def _run_callbacks(self, callbacks: list[Callable[[], object]]) -> None:
        if self._closing.is_set():
            return
        for callback in list(callbacks):
            try:
                callback()
            except Exception:
                log.exception("ZooKeeper session callback failed")

    def _after_connected(self) -> None:
        """On the dedicated thread after (re)connecting: re-arm every watch; report a new session."""
        zk = self._zk
        if zk is None or self._closing.is_set():
            return
        client_id = zk.client_id
        if client_id is None:
            return  # lost again already: the next CONNECTED runs this again
        new_session = client_id[0] != self._session_id
        if new_session:
            try:
                for path in zd.PERSISTENT_PATHS:
                    ensure_path(zk, path)
            except _RETRIABLE:
                return
            log.info("ZooKeeper session 0x%x established (%s)", client_id[0], self.connect)
        self._watches = [w for w in self._watches if w.active]
        for watch in list(self._watches):
            self._arm(watch, deliver_always=False)
        if new_session:
            self._session_id = client_id[0]
            self._call_soon(self._run_callbacks, self._reconnected_callbacks)

    def current_session_id(self) -> int | None:
        """The live session's id, from kazoo (the dedicated thread's view, even before callbacks ran)."""
        client_id = self._zk.client_id if self._zk is not None else None
        return client_id[0] if client_id else None

    # --- watches -------------------------------------------------------------------------------------

    async def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> ZkWatch:
        """``callback(sorted children)`` on the event loop now and after every change (re-armed, across sessions)."""
        return await self._watch(ZkWatch(path, ZkWatchKind.CHILDREN, callback))

    async def watch_data(self, path: str, callback: Callable[[bytes | None], None]) -> ZkWatch:
        """``callback(data, or None while the znode does not exist)`` now and after every change."""
        return await self._watch(ZkWatch(path, ZkWatchKind.DATA, callback))

    async def _watch(self, watch: ZkWatch) -> ZkWatch:
        watch.on_event = lambda event_type: self._on_watch_event(watch, event_type)
        self._watches.append(watch)
        await self._run(lambda: self._arm(watch, deliver_always=True))
        return watch

    def unwatch(self, watch: ZkWatch) -> None:
        """No more callbacks for ``watch`` (kazoo's pending one-shot watch is simply ignored)."""
        watch.active = False
        if watch in self._watches:
            self._watches.remove(watch)

    def _on_watch_event(self, watch: ZkWatch, event_type: str) -> None:
        """A kazoo thread: a real event re-arms on the dedicated thread; a connection loss waits for CONNECTED."""
        if watch.active and event_type != "NONE" and not self._closing.is_set():
            self._submit(self._arm, watch, False)

    def _arm(self, watch: ZkWatch, deliver_always: bool) -> None:
        """On the dedicated thread: read the znode, set kazoo's one-shot watch, deliver a changed value."""
        if not watch.active or self._closing.is_set() or self._zk is None:
            return
        try:
            value, version = read_watched(self._zk, watch)
        except _RETRIABLE:
            if deliver_always:  # the first read must succeed: wait for the connection
                self._wait_connected()
                self._arm(watch, deliver_always)
            return  # otherwise the next CONNECTED re-arms
        if deliver_always or version != watch.last:
            watch.last = version
            self._call_soon(self._deliver, watch, value)

    @staticmethod
    def _deliver(watch: ZkWatch, value: object) -> None:
        if not watch.active:
            return
        try:
            watch.callback(value)
        except Exception:
            log.exception("ZooKeeper watch callback for %s failed", watch.path)

    # --- generic ---------------------------------------------------------------------------------------

    async def get_data(self, path: str) -> tuple[bytes, int] | None:
        """(data, znode version), or None if the znode does not exist."""
        def get() -> tuple[bytes, int] | None:
            try:
                data, stat = self._retry(lambda: self._client.get(path))
            except NoNodeError:
                return None
            return data, stat.version
        return await self._run(get)

    async def get_data_and_ctime(self, paths: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        """path -> (data, creation time in ms) for the znodes that exist (pipelined)."""
        wanted = list(paths)

        def get() -> dict[str, tuple[bytes, int]]:
            zk = self._client
            results = self._pipeline([lambda p=p: zk.get_async(p) for p in wanted])  # type: ignore[misc]
            found: dict[str, tuple[bytes, int]] = {}
            for path, result in zip(wanted, results, strict=True):
                if isinstance(result, NoNodeError):
                    continue
                if isinstance(result, Exception):
                    raise result
                found[path] = (result[0], int(result[1].ctime))
            return found
        return await self._run(get)

    async def get_children(self, path: str) -> list[str]:
        """Sorted children; [] if the znode does not exist."""
        def get() -> list[str]:
            try:
                return sorted(self._retry(lambda: self._client.get_children(path)))
            except NoNodeError:
                return []
        return await self._run(get)

    async def delete_paths(self, paths: Iterable[str], recursive: bool = False) -> None:
        """Delete znodes that exist (missing ones are fine)."""
        wanted = list(paths)

        def delete() -> None:
            for path in wanted:
                try:
                    self._retry(lambda p=path: self._client.delete(p, recursive=recursive))  # type: ignore[misc]
                except NoNodeError:
                    pass
        await self._run(delete)

    def _fenced(self, controller_epoch_zk_version: int | None, add_ops: Callable[..., object]) -> Callable[[], Any]:
        """A kazoo async multi: the /controller_epoch version check (when given) followed by ``add_ops``."""
        zk = self._client

        def commit() -> Any:
            tx = zk.transaction()
            if controller_epoch_zk_version is not None:
                tx.check(zd.CONTROLLER_EPOCH_PATH, controller_epoch_zk_version)
            add_ops(tx)
            return tx.commit_async()
        return commit

    def _fenced_ops(self, controller_epoch_zk_version: int | None, multis: Sequence[Callable[..., object]]) -> list[list[Any]]:
        """Pipelined fenced multis; ControllerMovedError if the epoch check refused any of them."""
        results = self._pipeline([self._fenced(controller_epoch_zk_version, ops) for ops in multis])
        out: list[list[Any]] = []
        for result in results:
            if isinstance(result, Exception):
                raise ZkError(f"multi failed: {result!r}") from result
            if controller_epoch_zk_version is not None:
                if isinstance(result[0], Exception) and not isinstance(result[0], RolledBackError):
                    raise ControllerMovedError(
                        f"controller epoch znode version {controller_epoch_zk_version} is stale: another controller was elected"
                    )
                result = result[1:]
            out.append(result)
        return out


    def _create(self, path: str, data: bytes, sequence: bool = False) -> str:
        """Create a persistent znode and any missing parents (retried until connected); the created path."""
        zk = self._client

        def attempt() -> str:
            try:
                created: str = zk.create(path, data, sequence=sequence)
            except NoNodeError:
                ensure_path(zk, path.rsplit("/", 1)[0])
                created = zk.create(path, data, sequence=sequence)
            return created
        return self._retry(attempt)

    def _set_or_create(self, path: str, data: bytes) -> None:
        zk = self._client
        while True:
            try:
                self._retry(lambda: zk.set(path, data))
                return
            except NoNodeError:
                pass
            try:
                self._create(path, data)
                return
            except KazooNodeExistsError:
                continue


    def _subtree_post_order(self, root: str) -> list[str]:
        zk = self._client
        try:
            children = self._retry(lambda: zk.get_children(root))
        except NoNodeError:
            return []
        out: list[str] = []
        for child in sorted(children):
            out += self._subtree_post_order(f"{root}/{child}")
        out.append(root)
        return out


def ensure_path(zk: KazooClient, path: str) -> None:
    """Create every missing znode of ``path``, synchronously on the calling thread.

    (kazoo's own ensure_path chains its calls on kazoo's callback threads.)
    """
    current = ""
    for part in path.strip("/").split("/"):
        if not part:
            continue
        current += "/" + part
        if zk.exists(current) is None:
            try:
                zk.create(current, b"")
            except KazooNodeExistsError:
                pass


def _stop_kazoo(zk: KazooClient) -> None:
    try:
        zk.stop()
    finally:
        zk.close()


def first_error(results: list[Any]) -> Exception | None:
    """The error of a failed multi (kazoo reports RolledBackError for the operations it did not apply)."""
    errors = [r for r in results if isinstance(r, Exception)]
    real = [e for e in errors if not isinstance(e, RolledBackError)]
    return real[0] if real else (errors[0] if errors else None)


def raise_first_error(results: list[Any], path: str, ignore: tuple[type[Exception], ...] = ()) -> None:
    error = first_error(results)
    if error is None or isinstance(error, ignore):
        return
    if isinstance(error, KazooNodeExistsError):
        raise NodeExistsError(f"{path} already exists")
    if isinstance(error, BadVersionError):
        raise ZkBadVersionError(f"{path}: the znode's version moved on")
    raise ZkError(f"{path}: {error!r}") from error
