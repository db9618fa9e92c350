"""Persistent watches on top of ZooKeeper's one-shot ones (used by kafka_zk_client).

A :class:`ZkWatch` is one registration: a path, children or data, and the callback
its owner wants on the event loop. ZooKeeper fires a watch once; the client re-reads
the znode with a new watch each time (and after every reconnection, since kazoo
drops its watchers on a connection loss) and delivers the value when the znode changed.

"Changed" is judged by the znode's zxids, not by the value alone: a child deleted and
created again while the connection was down (a broker whose session expired and that
registered again) leaves the same children names but a new ``pzxid``, and the owner
must hear of it, as ZooKeeper's own SetWatches on reconnection would fire the watch.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import NoNodeError


class ZkWatchKind(enum.Enum):
    CHILDREN = "children"
    DATA = "data"


class ZkWatch:
    """One watch registration; ``cancel()`` stops its callbacks."""

    def __init__(self, path: str, kind: ZkWatchKind, callback: Callable[[Any], None]) -> None:
        self.path = path
        self.kind = kind
        self.callback = callback
        self.active = True
        #: The zxids of the znode as last delivered (see :func:`read_watched`; None: never read, or missing).
        self.last: object = None
        #: Set by the client: called on a kazoo thread with the event's type name.
        self.on_event: Callable[[str], None] = lambda _type: None

    def cancel(self) -> None:
        self.active = False

    def kazoo_watcher(self, event: Any) -> None:
        """The callable handed to kazoo (a bound method: re-adding it to kazoo's watcher set is a no-op)."""
        if self.active:
            self.on_event(str(event.type))

    def __repr__(self) -> str:
        return f"ZkWatch({self.kind.value} {self.path}, active={self.active})"


def read_watched(zk: Any, watch: ZkWatch) -> tuple[list[str] | bytes | None, tuple[int, int] | None]:
    """Read the znode and set kazoo's one-shot watch (blocking: the client's ZooKeeper thread only): its
    value and its version, (czxid, pzxid) for children and (czxid, mzxid) for data, which move with
    every change of the children or the data, even one that ends where it began.

    A missing znode gets an ``exists`` watch, so its creation is noticed: children
    [] and data None meanwhile, version None.
    """
    while True:
        try:
            if watch.kind is ZkWatchKind.CHILDREN:
                children, stat = zk.get_children(watch.path, watch=watch.kazoo_watcher, include_data=True)
                return sorted(children), (stat.czxid, stat.pzxid)
            data, stat = zk.get(watch.path, watch=watch.kazoo_watcher)
            return bytes(data), (stat.czxid, stat.mzxid)
        except NoNodeError:
            if zk.exists(watch.path, watch=watch.kazoo_watcher) is None:
                return ([] if watch.kind is ZkWatchKind.CHILDREN else None), None
            # created between the two reads: read it again
