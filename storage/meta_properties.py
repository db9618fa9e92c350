"""meta.properties: the file binding a log directory to its cluster and broker (Kafka's MetaProperties).

A broker in ZooKeeper mode writes, in every log directory, a Java properties file::

    #
    #Thu Nov 26 00:44:45 UTC 2026
    cluster.id=6l6rn0dUTkS8fQ-ZjQDbsQ
    version=0
    broker.id=1

(version 0; KRaft's version 1 names ``node.id`` and ``directory.id`` instead). At start
the broker compares it with the cluster id it found in ZooKeeper and its configured
broker.id, and refuses to start on a mismatch, with Kafka's messages: data of another
cluster, or of another broker, is never mixed in. The file is replaced atomically
(``.tmp``, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable
from pathlib import Path

from storage.checkpoints import write_atomically

FILE_NAME = "meta.properties"
#: ZooKeeper mode's format; KRaft writes version 1.
ZK_VERSION = 0
KRAFT_VERSION = 1


class MetaPropertiesError(Exception):
    """meta.properties forbids starting: unreadable, or it belongs to another cluster or broker."""


class InconsistentClusterIdError(MetaPropertiesError):
    """Kafka's InconsistentClusterIdException."""


class InconsistentBrokerIdError(MetaPropertiesError):
    """Kafka's InconsistentBrokerIdException."""


class InconsistentBrokerMetadataError(MetaPropertiesError):
    """Kafka's InconsistentBrokerMetadataException: log directories disagree."""


@dataclasses.dataclass(frozen=True)
class MetaProperties:
    cluster_id: str | None
    broker_id: int | None
    version: int = ZK_VERSION
    #: KRaft's version 1 only (a directory's own id).
    directory_id: str | None = None

    def to_properties(self) -> dict[str, str]:
        props: dict[str, str] = {}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        props["version"] = str(self.version)
        if self.broker_id is not None:
            props["node.id" if self.version == KRAFT_VERSION else "broker.id"] = str(self.broker_id)
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props

    @classmethod
    def from_properties(cls, props: dict[str, str], where: str = FILE_NAME) -> MetaProperties:
        try:
            version = int(props["version"])
        except KeyError as e:
            raise MetaPropertiesError(f"Failed to load {where}: no version") from e
        except ValueError as e:
            raise MetaPropertiesError(f"Failed to load {where}: version {props['version']!r} is not a number") from e
        if version not in (ZK_VERSION, KRAFT_VERSION):
            raise MetaPropertiesError(f"Failed to load {where}: unknown version {version}")
        id_key = "node.id" if version == KRAFT_VERSION else "broker.id"
        broker_id = None
        if id_key in props:
            try:
                broker_id = int(props[id_key])
            except ValueError as e:
                raise MetaPropertiesError(f"Failed to load {where}: {id_key} {props[id_key]!r} is not a number") from e
        elif version == KRAFT_VERSION:
            raise MetaPropertiesError(f"Failed to load {where}: no node.id")
        return cls(props.get("cluster.id"), broker_id, version, props.get("directory.id"))


# --- Java properties text -------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "=:#!" or (ch == " " and (is_key or i == 0)):
            out.append("\\" + ch)
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        else:
            out.append(ch)
    return "".join(out)


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """The subset of java.util.Properties' format that Kafka's files use (one entry a line)."""
    props: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.lstrip()
        if not line or line[0] in "#!":
            continue
        # The key ends at the first unescaped '=', ':' or whitespace.
        i = 0
        while i < len(line) and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def format_properties(props: dict[str, str], now: float | None = None) -> str:
    """As Properties.store(writer, "") writes it: an empty comment, the date, then the entries."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(time.time() if now is None else now))
    lines = ["#", f"#{stamp}"]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


# --- files ---------------------------------------------------------------------------------------------


def read_meta_properties(log_dir: str | os.PathLike[str]) -> MetaProperties | None:
    """The directory's meta.properties, or None when it has none (a new directory)."""
    path = Path(log_dir) / FILE_NAME
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MetaPropertiesError(f"Failed to read {path}: {e}") from e
    return MetaProperties.from_properties(parse_properties(text), str(path))


def write_meta_properties(log_dir: str | os.PathLike[str], props: MetaProperties) -> None:
    """Replace the directory's meta.properties atomically (creating the directory if needed)."""
    directory = Path(log_dir)
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / FILE_NAME, format_properties(props.to_properties()))


def load_meta_properties(log_dirs: Iterable[str | os.PathLike[str]]) -> MetaProperties | None:
    """What the log directories agree on (None if none has the file); they must not disagree."""
    found = {str(d): p for d in log_dirs if (p := read_meta_properties(d)) is not None}
    if not found:
        return None
    cluster_ids = {p.cluster_id for p in found.values() if p.cluster_id is not None}
    broker_ids = {p.broker_id for p in found.values() if p.broker_id is not None}
    if len(cluster_ids) > 1 or len(broker_ids) > 1:
        listing = ", ".join(f"{d} -> {p.to_properties()}" for d, p in sorted(found.items()))
        raise InconsistentBrokerMetadataError(
            "BrokerMetadata is not consistent across log.dirs. This could happen if multiple brokers shared a log "
            f"directory (log.dirs) or partial data was manually copied from another broker. Found: {listing}")
    return MetaProperties(next(iter(cluster_ids), None), next(iter(broker_ids), None), ZK_VERSION)


def _some(value: object) -> str:
    """Scala's rendering of an Option, as Kafka's messages show it."""
    return "None" if value is None else f"Some({value})"


def check_meta_properties(log_dirs: Iterable[str | os.PathLike[str]], cluster_id: str, broker_id: int) -> MetaProperties:
    """Check the log directories against the cluster's id and this broker's id; write the file where missing.

    ``broker_id`` -1 (broker.id not configured) takes the stored one, if any: the caller
    generates an id from ZooKeeper only when this returns ``broker_id`` None. A stored
    cluster.id or broker.id that differs raises Kafka's error; nothing is written then.
    """
    dirs = [Path(d) for d in log_dirs]
    stored = load_meta_properties(dirs)
    if stored is not None and stored.cluster_id is not None and stored.cluster_id != cluster_id:
        raise InconsistentClusterIdError(
            f"The Cluster ID {cluster_id} doesn't match stored clusterId {_some(stored.cluster_id)} in meta.properties. "
            "The broker is trying to join the wrong cluster. Configured zookeeper.connect may be wrong.")
    stored_broker_id = stored.broker_id if stored is not None else None
    if broker_id >= 0 and stored_broker_id is not None and stored_broker_id != broker_id:
        raise InconsistentBrokerIdError(
            f"Configured broker.id {broker_id} doesn't match stored broker.id {_some(stored_broker_id)} in "
            "meta.properties. If you moved your data, make sure your configured broker.id matches. If you intend to "
            "create a new broker, you should remove all data in your data directories (log.dirs).")
    chosen = broker_id if broker_id >= 0 else stored_broker_id
    props = MetaProperties(cluster_id, chosen, ZK_VERSION)
    if chosen is not None:
        for directory in dirs:
            if read_meta_properties(directory) != props:
                write_meta_properties(directory, props)
    return props
