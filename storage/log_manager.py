"""LogManager: every partition log under ``log.dirs``, their checkpoints and background passes.

Per log dir (Kafka's layout):

* ``<topic>-<partition>/`` partition directories;
* ``meta.properties`` (``version=0``, ``broker.id``, ``cluster.id``), checked
  against the running broker on startup;
* ``.lock``, held with ``fcntl.flock`` while the broker runs, so two brokers
  never share a directory;
* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint`` (high watermarks), in Kafka's text format;
* ``.kafka_cleanshutdown``, written after a clean shutdown and removed once
  the logs are loaded, so only a crash leaves a log dir without it.

The broker's scheduler calls ``cleanup_logs`` (retention, every
``log.retention.check.interval.ms``), ``flush_dirty_logs`` (``flush.ms``),
``checkpoint_*`` (every ``log.flush.offset.checkpoint.interval.ms``) and
``delete_pending_segments`` (``file.delete.delay.ms``), in a worker thread.

Moving a replica between log dirs (KIP-113): ``create_future_log`` opens
``<topic>-<partition>.<uniqueId>-future`` in the target dir, the replica manager
copies the current log into it, and ``replace_current_with_future_log`` swaps them:
the current log is renamed ``.<uniqueId>-delete`` (deleted after
``file.delete.delay.ms``, so reads already handed its files finish), the future
one takes the partition's name. A future log found at start-up is loaded again
(the move resumes); one whose current log is gone (a crash between the two
renames) becomes the current log.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
    write_atomically,
)
from storage.errors import KafkaStorageError
from storage.log import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, Log, parse_topic_partition
from storage.log_config import LogConfig
from storage.log_dir_failure_channel import LogDirFailureChannel
from storage.progress import Progress

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"

TopicPartition = tuple[str, int]
#: Told a topic and its config (defaults with the topic's overrides) whenever the overrides change.
TopicConfigListener = Callable[[str, LogConfig], None]


def read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


class LogManager:
    def __init__(
        self,
        log_dirs: Iterable[str | Path],
        default_config: LogConfig | None = None,
        topic_configs: Mapping[str, Mapping[str, object]] | None = None,
        broker_id: int = 0,
        cluster_id: str | None = None,
        with_producer_state: bool = True,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.topic_overrides: dict[str, dict[str, object]] = {t: dict(c) for t, c in (topic_configs or {}).items()}
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.with_producer_state = with_producer_state
        self.logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        #: Replicas being moved to another log dir: their future logs (Kafka's futureLogs).
        self.future_logs: dict[TopicPartition, Log] = {}
        #: Where a replica not created yet is to be created (Kafka's preferredLogDirs).
        self._preferred_log_dirs: dict[TopicPartition, Path] = {}
        #: Logs replaced by their future log: (log, its renamed dir, when to delete it).
        self._logs_to_delete: list[tuple[Log, Path, float]] = []
        self._locks: dict[Path, int] = {}
        self._mutex = threading.RLock()
        # checkpoint files are written from the scheduler, append and loop threads; one at a time
        self._checkpoint_lock = threading.Lock()
        self._topic_config_listeners: list[TopicConfigListener] = []
        self.started = False
        #: Directories whose disk failed: their logs go offline, the others keep serving.
        self.failure_channel = LogDirFailureChannel()
        self.failure_channel.add_listener(self._take_offline)

    # --- startup / shutdown -----------------------------------------------------------
    def startup(self) -> None:
        for dir in self.log_dirs:
            dir.mkdir(parents=True, exist_ok=True)
            self._lock_dir(dir)
            self._check_meta_properties(dir)
        recovered = [dir for dir in self.log_dirs if not (dir / CLEAN_SHUTDOWN_FILE).exists()]
        for dir in self.log_dirs:
            try:
                self._load_logs(dir)
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(dir, "loading its logs failed", exc)
        if self.log_dirs and not self.online_log_dirs:
            raise KafkaStorageError(f"no log directory of {[str(d) for d in self.log_dirs]} is usable")
        self._promote_orphaned_future_logs()
        if recovered:
            # A recovery may have cut logs below their checkpointed recovery points;
            # appends there must not pass for flushed if the broker crashes again
            # before the next scheduled checkpoint.
            self.checkpoint_log_recovery_offsets()
        self.started = True

    def _lock_dir(self, dir: Path) -> None:
        fd = os.open(dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise KafkaStorageError(
                    f"failed to acquire lock on file .lock in {dir}. A Kafka instance in another process "
                    f"or thread is using this directory."
                ) from None
            raise
        self._locks[dir] = fd

    def _check_meta_properties(self, dir: Path) -> None:
        path = dir / META_PROPERTIES
        if path.exists():
            props = read_properties(path)
            stored = props.get("broker.id", props.get("node.id"))
            if stored is not None and int(stored) != self.broker_id:
                raise KafkaStorageError(
                    f"configured broker.id {self.broker_id} doesn't match stored broker.id {stored} in {path}"
                )
            if self.cluster_id is None:
                self.cluster_id = props.get("cluster.id")
            return
        lines = ["#", "version=0", f"broker.id={self.broker_id}"]
        if self.cluster_id:
            lines.append(f"cluster.id={self.cluster_id}")
        write_atomically(path, "\n".join(lines) + "\n")

    def _load_logs(self, dir: Path) -> None:
        marker = dir / CLEAN_SHUTDOWN_FILE
        had_clean_shutdown = marker.exists()
        recovery_points = OffsetCheckpointFile(dir / RECOVERY_POINT_OFFSET_CHECKPOINT).read_or_empty()
        start_offsets = OffsetCheckpointFile(dir / LOG_START_OFFSET_CHECKPOINT).read_or_empty()
        high_watermarks = OffsetCheckpointFile(dir / REPLICATION_OFFSET_CHECKPOINT).read_or_empty()
        if not had_clean_shutdown:
            log.info("%s: no clean shutdown marker; logs past their recovery point will be recovered", dir)
        children = [child for child in sorted(dir.iterdir()) if child.is_dir()]
        if children:
            # A recovery after a crash may take minutes: the log says how far it got.
            what = f"{'Loading' if had_clean_shutdown else 'Recovering'} logs in {dir}"
            with Progress(what, len(children), "logs", sink=log.info) as progress:
                for child in children:
                    self._load_log(dir, child, recovery_points, start_offsets, high_watermarks, had_clean_shutdown)
                    progress.advance()
        # Only a later crash may leave this dir without the marker.
        marker.unlink(missing_ok=True)
        fsync_dir(dir)

    def _load_log(self, dir: Path, child: Path, recovery_points: dict[TopicPartition, int],
                  start_offsets: dict[TopicPartition, int], high_watermarks: dict[TopicPartition, int],
                  had_clean_shutdown: bool) -> None:
        """Open (and, after a crash, recover) the log in ``child``, or clear away what is no log."""
        if child.name.endswith(DELETE_DIR_SUFFIX):
            log.info("%s: removing partition directory %s marked for deletion", dir, child.name)
            shutil.rmtree(child, ignore_errors=True)
            return
        try:
            tp = parse_topic_partition(child.name)
        except ValueError:
            log.warning("%s: ignoring directory %s (not <topic>-<partition>)", dir, child.name)
            return
        if child.name.endswith(FUTURE_DIR_SUFFIX):
            self._load_future_log(dir, child, tp, had_clean_shutdown)
            return
        opened = Log.open(
            child, self.config_for(tp[0]),
            log_start_offset=start_offsets.get(tp, 0),
            recovery_point=recovery_points.get(tp, 0),
            had_clean_shutdown=had_clean_shutdown,
            producer_state=True if self.with_producer_state else None,
        )
        opened.update_high_watermark(high_watermarks.get(tp, opened.log_start_offset))
        opened.on_io_error = self.failure_channel.maybe_add_offline_log_dir
        self.logs[tp] = opened
        self._log_dir_of[tp] = dir

    def _load_future_log(self, dir: Path, child: Path, tp: TopicPartition, had_clean_shutdown: bool) -> None:
        """A move interrupted by the shutdown: its future log is loaded, and the move resumes."""
        opened = Log.open(child, self.config_for(tp[0]), had_clean_shutdown=had_clean_shutdown,
                          producer_state=True if self.with_producer_state else None)
        opened.on_io_error = self.failure_channel.maybe_add_offline_log_dir
        self.future_logs[tp] = opened
        log.info("%s: loaded the future log of %s-%d (moving here)", dir, *tp)

    def _promote_orphaned_future_logs(self) -> None:
        """A crash after the current log was renamed for deletion, before the future log took its
        name: the future log (a full copy) is the partition's log."""
        for tp in [tp for tp in self.future_logs if tp not in self.logs]:
            future = self.future_logs.pop(tp)
            dir = future.dir.parent
            if self.failure_channel.has_offline_log_dir(dir):
                continue
            self._install(tp, self._renamed(future, dir / f"{tp[0]}-{tp[1]}"), dir)
            log.info("%s: the future log of %s-%d became its log (its move had swapped)", dir, *tp)

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints and the clean-shutdown marker."""
        with self._mutex:
            for opened in [*self.logs.values(), *self.future_logs.values()]:
                if opened.offline:
                    opened.close_without_flush()
                else:
                    opened.close()
            self.delete_replaced_logs(due_by=float("inf"))
            self.future_logs.clear()
            self.checkpoint_all()
            for dir in self.online_log_dirs:
                if dir in self._locks:
                    write_atomically(dir / CLEAN_SHUTDOWN_FILE, "")
            self._release_locks()
            self.logs.clear()
            self.started = False

    def close_without_clean_shutdown(self) -> None:
        """Release everything as a crash would (no flush, no marker); for tests and failed dirs."""
        with self._mutex:
            for opened in [*self.logs.values(), *self.future_logs.values()]:
                opened.close_without_flush()
            self.future_logs.clear()
            self._release_locks()
            self.logs.clear()
            self.started = False

    def _release_locks(self) -> None:
        for fd in self._locks.values():
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self._locks.clear()

    # --- logs -----------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        overrides = self.topic_overrides.get(topic)
        return self.default_config.with_overrides(overrides) if overrides else self.default_config

    def update_topic_config(self, topic: str, overrides: Mapping[str, object]) -> None:
        """New topic overrides apply to the topic's open logs at once (as Kafka's dynamic configs)."""
        with self._mutex:
            self.topic_overrides[topic] = dict(overrides)
            config = self.config_for(topic)
            for (t, _), opened in self.logs.items():
                if t == topic:
                    opened.config = config
            for listener in self._topic_config_listeners:
                listener(topic, config)

    def add_topic_config_listener(self, listener: TopicConfigListener) -> None:
        """Be told every topic's config now and on every change of its overrides.

        Kafka's TopicConfigHandler hands a changed topic config to the logs and to the
        replication quotas; here every override, from the admin APIs or ZooKeeper, passes
        through ``update_topic_config``, so the quotas follow it from there. Called on the
        thread making the change (the append thread, or the loop at start-up).
        """
        with self._mutex:
            self._topic_config_listeners.append(listener)
            for topic in list(self.topic_overrides):
                listener(topic, self.config_for(topic))

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int) -> Log:
        tp = (topic, partition)
        with self._mutex:
            existing = self.logs.get(tp)
            if existing is not None:
                return existing
            dir = self._preferred_log_dirs.pop(tp, None)
            if dir is None or self.failure_channel.has_offline_log_dir(dir):
                dir = self._next_log_dir()
            try:
                opened = Log.open(dir / f"{topic}-{partition}", self.config_for(topic), had_clean_shutdown=True,
                                  producer_state=True if self.with_producer_state else None)
            except OSError as exc:
                self.failure_channel.maybe_add_offline_log_dir(dir, f"creating the log of {topic}-{partition} failed",
                                                               exc)
                raise KafkaStorageError(f"{topic}-{partition}: cannot create its log in {dir}: {exc}") from exc
            opened.on_io_error = self.failure_channel.maybe_add_offline_log_dir
            self.logs[tp] = opened
            self._log_dir_of[tp] = dir
            log.info("Created log for partition %s-%d in %s", topic, partition, dir)
            return opened

    def _next_log_dir(self) -> Path:
        """The online log dir holding the fewest partitions, as Kafka picks."""
        online = self.online_log_dirs
        if not online:
            raise KafkaStorageError("every log directory is offline")
        counts = dict.fromkeys(online, 0)
        for dir in self._log_dir_of.values():
            if dir in counts:
                counts[dir] += 1
        return min(online, key=lambda d: counts[d])

    @property
    def online_log_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failure_channel.has_offline_log_dir(d)]

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def _take_offline(self, dir: Path) -> None:
        """The channel's first word of a failed directory: its logs refuse every call from now on."""
        for tp, opened in list(self.logs.items()):
            if self._log_dir_of.get(tp) == dir:
                opened.offline = True
        for opened in list(self.future_logs.values()):
            if opened.dir.parent == dir:
                opened.offline = True

    def delete_log(self, topic: str, partition: int) -> None:
        """Topic deletion: rename the dir ``<tp>.<uuid>-delete`` (crash-safe), then remove it."""
        tp = (topic, partition)
        self.remove_future_log(topic, partition)
        with self._mutex:
            opened = self.logs.pop(tp, None)
            dir = self._log_dir_of.pop(tp, None)
        if opened is None or dir is None:
            return
        opened.close_without_flush()
        doomed = opened.dir.with_name(f"{opened.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(opened.dir, doomed)
        fsync_dir(dir)
        shutil.rmtree(doomed, ignore_errors=True)
        self.checkpoint_all()

    # --- moving replicas between log dirs (KIP-113) -------------------------------------------
    def log_dir_by_path(self, path: str) -> Path | None:
        """The configured log dir ``path`` (absolute, as DescribeLogDirs names it) is, or None."""
        wanted = Path(os.path.abspath(path))
        for dir in self.log_dirs:
            if Path(os.path.abspath(dir)) == wanted or dir.resolve() == wanted.resolve():
                return dir
        return None

    def maybe_update_preferred_log_dir(self, topic: str, partition: int, dir: Path) -> None:
        """A replica not created yet will be created in ``dir`` (Kafka's maybeUpdatePreferredLogDir)."""
        tp = (topic, partition)
        with self._mutex:
            if self._log_dir_of.get(tp) != dir and not self._is_future_in(tp, dir):
                self._preferred_log_dirs[tp] = dir

    def _is_future_in(self, tp: TopicPartition, dir: Path) -> bool:
        future = self.future_logs.get(tp)
        return future is not None and future.dir.parent == dir

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        return self.future_logs.get((topic, partition))

    def create_future_log(self, topic: str, partition: int, dir: Path) -> Log:
        """The future log of a replica moving to ``dir`` (the one there already, if any). Blocking."""
        tp = (topic, partition)
        with self._mutex:
            self._preferred_log_dirs.pop(tp, None)
            existing = self.future_logs.get(tp)
            if existing is not None and existing.dir.parent == dir:
                return existing
        if existing is not None:
            self.remove_future_log(topic, partition)
        name = f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
        try:
            future = Log.open(dir / name, self.config_for(topic), had_clean_shutdown=True,
                              producer_state=True if self.with_producer_state else None)
        except OSError as exc:
            self.failure_channel.maybe_add_offline_log_dir(dir, f"creating the future log of {topic}-{partition} "
                                                                f"failed", exc)
            raise KafkaStorageError(f"{topic}-{partition}: cannot create its future log in {dir}: {exc}") from exc
        future.on_io_error = self.failure_channel.maybe_add_offline_log_dir
        with self._mutex:
            self.future_logs[tp] = future
        log.info("Created the future log of %s-%d in %s", topic, partition, dir)
        return future

    def remove_future_log(self, topic: str, partition: int) -> None:
        """Give up a move (another target, or the partition leaves): its future log goes. Blocking."""
        with self._mutex:
            future = self.future_logs.pop((topic, partition), None)
        if future is not None:
            future.on_io_error = None  # a copy step still writing to it fails, and says nothing of the disk
            future.close_without_flush()
            shutil.rmtree(future.dir, ignore_errors=True)
            log.info("Removed the future log of %s-%d in %s", topic, partition, future.dir.parent)

    def replace_current_with_future_log(self, topic: str, partition: int) -> Log:
        """Swap a caught-up future log in for the current one; returns the partition's new log.

        Blocking; the caller holds the current log's lock, so nothing is appended to it meanwhile.
        The current log is renamed for deletion first, then the future log takes its name (the
        loader finishes a swap a crash cut between the two). The old log's files stay open
        until ``delete_replaced_logs``: a fetch may still be sending from them.
        """
        tp = (topic, partition)
        with self._mutex:
            current, future = self.logs[tp], self.future_logs.pop(tp)
            dir = future.dir.parent
            future.close()  # flushed, producer state snapshotted: it reopens as after a clean shutdown
            doomed = current.dir.with_name(f"{current.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            os.replace(current.dir, doomed)
            fsync_dir(doomed.parent)
            current.on_io_error = None  # its paths are stale now: an error there says nothing of the disk
            replacement = self._renamed(future, dir / current.dir.name)
            replacement.update_high_watermark(current.high_watermark)
            replacement.maybe_increment_log_start_offset(current.log_start_offset, "replica moved")
            self._install(tp, replacement, dir)
            delay_s = current.config.file_delete_delay_ms / 1000
            self._logs_to_delete.append((current, doomed, time.monotonic() + delay_s))
        self.checkpoint_all()
        log.info("The log of %s-%d moved from %s to %s", topic, partition, doomed.parent, dir)
        return replacement

    def _renamed(self, future: Log, target: Path) -> Log:
        """Close ``future``, give its directory the partition's name and open it there."""
        future.close()
        os.replace(future.dir, target)
        fsync_dir(target.parent)
        return Log.open(target, self.config_for(future.topic), log_start_offset=future.log_start_offset,
                        recovery_point=future.log_end_offset, had_clean_shutdown=True,
                        producer_state=True if self.with_producer_state else None)

    def _install(self, tp: TopicPartition, opened: Log, dir: Path) -> None:
        opened.on_io_error = self.failure_channel.maybe_add_offline_log_dir
        self.logs[tp] = opened
        self._log_dir_of[tp] = dir

    def delete_replaced_logs(self, due_by: float | None = None) -> int:
        """Close and remove the logs replaced by a future log whose delay is over; how many went."""
        now = time.monotonic() if due_by is None else due_by
        with self._mutex:
            due = [(opened, doomed) for opened, doomed, at in self._logs_to_delete if at <= now]
            self._logs_to_delete = [entry for entry in self._logs_to_delete if entry[2] > now]
        for opened, doomed in due:
            opened.close_without_flush()
            shutil.rmtree(doomed, ignore_errors=True)
        return len(due)

    def all_logs(self) -> list[Log]:
        return list(self.logs.values())

    # --- checkpoints ------------------------------------------------------------------------
    def _logs_by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        grouped: dict[Path, dict[TopicPartition, Log]] = {dir: {} for dir in self.log_dirs}
        # a snapshot: checkpoints run on the scheduler thread while the loop may add logs
        for tp, opened in list(self.logs.items()):
            dir = self._log_dir_of.get(tp)
            if dir is not None:  # None: deleted since the snapshot
                grouped[dir][tp] = opened
        return grouped

    def _write_checkpoint(self, name: str, value: Callable[[Log], int]) -> None:
        with self._checkpoint_lock:
            for dir, logs in self._logs_by_dir().items():
                if self.failure_channel.has_offline_log_dir(dir):
                    continue
                try:
                    OffsetCheckpointFile(dir / name).write({tp: value(opened) for tp, opened in logs.items()})
                except OSError as exc:
                    self.failure_channel.maybe_add_offline_log_dir(dir, f"writing {name} failed", exc)

    def checkpoint_log_recovery_offsets(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_OFFSET_CHECKPOINT, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark)

    def checkpoint_all(self) -> None:
        self.checkpoint_log_recovery_offsets()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    # --- background passes ----------------------------------------------------------------------
    def cleanup_logs(self, now: int | None = None) -> int:
        """Retention over every log; returns the number of segments deleted."""
        deleted = sum(self._guarded(opened, "retention", lambda lg: lg.delete_old_segments(now))
                      for opened in self.all_logs())
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    def flush_dirty_logs(self, now: int | None = None) -> int:
        return sum(1 for opened in self.all_logs() if self._guarded(opened, "flush", lambda lg: lg.flush_if_due(now)))

    def delete_pending_segments(self, now: int | None = None) -> int:
        self.delete_replaced_logs()
        return sum(self._guarded(opened, "deleting segments", lambda lg: lg.delete_pending_segments(now))
                   for opened in self.all_logs())

    def _guarded(self, opened: Log, what: str, work: Callable[[Log], int | bool]) -> int:
        """A background pass over one log: a log offline is skipped, an OSError takes its directory offline."""
        if opened.offline:
            return 0
        try:
            return int(work(opened))
        except (OSError, KafkaStorageError) as exc:
            if isinstance(exc, OSError):
                self.failure_channel.maybe_add_offline_log_dir(opened.dir.parent, f"{opened.name}: {what} failed", exc)
            return 0
