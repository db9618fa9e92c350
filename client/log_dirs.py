"""What DescribeLogDirs tells of a broker's log dirs, as Kafka's admin client hands it out
(``LogDirDescription`` and ``ReplicaInfo``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.errors import ErrorCode
from protocol.messages import describe_log_dirs as _dld

__all__ = ["LogDirDescription", "ReplicaInfo", "log_dir_descriptions"]


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica in a log dir: its size in bytes, how far it is behind (the high watermark, or the
    current log for a future replica) and whether it is a future replica still being copied."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error_code: int
    replicas: dict[tuple[str, int], ReplicaInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1

    @property
    def error_class_name(self) -> str | None:
        """Kafka's name for the dir's error (``...KafkaStorageException`` for an offline dir), or None."""
        if self.error_code == ErrorCode.NO_ERROR:
            return None
        try:
            name = ErrorCode(self.error_code).name
        except ValueError:
            name = "UNKNOWN_SERVER_ERROR"
        words = name.removesuffix("_ERROR").split("_")
        return "org.apache.kafka.common.errors." + "".join(w.capitalize() for w in words) + "Exception"


def log_dir_descriptions(response: _dld.DescribeLogDirsResponse) -> dict[str, LogDirDescription]:
    """The log dirs of one broker's DescribeLogDirs answer, by path."""
    return {r.log_dir: LogDirDescription(
        r.log_dir, r.error_code,
        {(t.name, p.partition_index): ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key)
         for t in r.topics for p in t.partitions},
        r.total_bytes, r.usable_bytes) for r in response.results}
