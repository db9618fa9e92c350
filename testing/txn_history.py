"""A history of a transactional workload and a checker of it, in the spirit of Jepsen's Kafka checker.

Producers record what they did: each transaction's sends (a value unique in the
whole history, and the partition it went to) and how it ended as far as the
producer knows: committed (``commit_transaction`` returned), aborted
(``abort_transaction`` returned, or no commit was ever asked for), or unknown (a
commit was asked for and no answer came). Readers (``read_committed``
consumers) record every record they got: partition, offset, value, in the order
they got them, and whether they read to the end of every partition.

:func:`check` then looks for what a correct broker never shows:

- ``aborted-read``: a value of an aborted transaction was read;
- ``lost-write``: a value of a committed transaction was not read by a reader
  that read to the end;
- ``duplicate``: a value was read at two offsets;
- ``torn``: a reader that read to the end saw some values of a transaction but
  not all, in any partition (a transaction of unknown outcome may be wholly
  visible or wholly invisible, never torn);
- ``nonmonotonic-offset``: a reader's offsets in a partition did not strictly
  increase;
- ``reordered``: a reader saw a producer's values in a partition out of the
  order they were sent in;
- ``inconsistent-offset``: two readers saw different values at one offset;
- ``inconsistent-outcome``: two readers that read to the end disagree on
  whether a transaction is visible;
- ``unknown-value`` and ``wrong-partition``: a value read that was never sent,
  or read from a partition it was not sent to.

A transaction may also commit a group's offset (``send_offsets_to_transaction``,
an offset that grows with each transaction of the group). Given the offsets the
groups hold at the end, :func:`check` also finds, as exactly-once requires
offsets and output to be one:

- ``offsets-of-invisible``: the group's offset is that of a transaction whose
  records are not visible (aborted, or of unknown outcome and not read);
- ``offsets-lost``: a later transaction of the group is visible (committed, or
  read) but the group's offset is older;
- ``offsets-unknown``: the group's offset is no transaction's.

Recording is thread-safe: producers and readers may run in threads.
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


class Outcome(enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    #: A commit was asked for and its answer never came: either outcome is allowed, but only whole.
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Send:
    value: bytes
    partition: int
    #: The position of this send among its producer's sends (the order its values must be read in).
    index: int


@dataclass(slots=True)
class Txn:
    txn_id: str
    producer: str
    sends: list[Send] = field(default_factory=list)
    #: None while the transaction runs; a transaction never ended counts as UNKNOWN.
    outcome: Outcome | None = None
    #: (group, offset) the transaction commits, if it sends offsets.
    offsets: tuple[str, int] | None = None

    @property
    def final_outcome(self) -> Outcome:
        return self.outcome or Outcome.UNKNOWN


@dataclass(frozen=True, slots=True)
class Read:
    partition: int
    offset: int
    value: bytes


@dataclass(slots=True)
class Reader:
    name: str
    reads: list[Read] = field(default_factory=list)
    #: Set once the reader has read to the end of every partition: only then can it miss a write.
    complete: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read(self, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.reads.append(Read(partition, offset, value))


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class History:
    def __init__(self) -> None:
        self.txns: list[Txn] = []
        self.readers: list[Reader] = []
        self._by_value: dict[bytes, tuple[Txn, Send]] = {}
        self._next_index: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    # -- recording ----------------------------------------------------------------------------
    def begin(self, producer: str) -> Txn:
        with self._lock:
            txn = Txn(f"{producer}/{sum(t.producer == producer for t in self.txns)}", producer)
            self.txns.append(txn)
            return txn

    def send(self, txn: Txn, value: bytes, partition: int) -> None:
        """Before the value is handed to the producer: a value sent is one that may be read."""
        with self._lock:
            if value in self._by_value:
                raise ValueError(f"value {value!r} sent twice: values must be unique in a history")
            send = Send(value, partition, self._next_index[txn.producer])
            self._next_index[txn.producer] += 1
            txn.sends.append(send)
            self._by_value[value] = (txn, send)

    def send_offsets(self, txn: Txn, group: str, offset: int) -> None:
        """Before ``send_offsets_to_transaction``: the transaction commits ``offset`` for ``group``."""
        with self._lock:
            txn.offsets = (group, offset)

    def end(self, txn: Txn, outcome: Outcome) -> None:
        with self._lock:
            if txn.outcome is not None:
                raise ValueError(f"{txn.txn_id} ended twice ({txn.outcome.value}, then {outcome.value})")
            txn.outcome = outcome

    def reader(self, name: str) -> Reader:
        with self._lock:
            reader = Reader(name)
            self.readers.append(reader)
            return reader

    def sent(self, value: bytes) -> tuple[Txn, Send] | None:
        return self._by_value.get(value)

    def summary(self) -> dict[str, int]:
        counts = {outcome.value: 0 for outcome in Outcome}
        for txn in self.txns:
            counts[txn.final_outcome.value] += 1
        counts["values"] = len(self._by_value)
        for reader in self.readers:
            counts[f"read by {reader.name}"] = len(reader.reads)
        return counts


# -- the checker ----------------------------------------------------------------------------------

def check(history: History, group_offsets: Mapping[str, int] | None = None) -> list[Anomaly]:
    """Every anomaly in ``history`` (empty: the history is one a correct broker may give).

    ``group_offsets``: the offset each group holds at the end (-1: none), for the offsets' checks.
    """
    anomalies: list[Anomaly] = []
    visible_per_reader: dict[str, set[str]] = {}
    for reader in history.readers:
        anomalies += _check_reader(history, reader)
        if reader.complete:
            visible_per_reader[reader.name] = {found[0].txn_id for r in reader.reads
                                               if (found := history.sent(r.value)) is not None}
    anomalies += _check_offsets_agree(history.readers)
    anomalies += _check_outcomes_agree(visible_per_reader)
    if group_offsets is not None:
        visible = set().union(*visible_per_reader.values()) if visible_per_reader else set()
        anomalies += _check_group_offsets(history.txns, visible, group_offsets)
    return anomalies


def _check_reader(history: History, reader: Reader) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    name = reader.name
    last_offset: dict[int, int] = {}
    last_index: dict[tuple[int, str], Send] = {}
    offsets_of: dict[bytes, set[tuple[int, int]]] = defaultdict(set)
    read_values_of: dict[str, set[bytes]] = defaultdict(set)
    for r in reader.reads:
        previous = last_offset.get(r.partition)
        if previous is not None and r.offset <= previous:
            anomalies.append(Anomaly("nonmonotonic-offset", f"{name} read offset {r.offset} of partition "
                                     f"{r.partition} after offset {previous}"))
        last_offset[r.partition] = r.offset
        offsets_of[r.value].add((r.partition, r.offset))
        found = history.sent(r.value)
        if found is None:
            anomalies.append(Anomaly("unknown-value", f"{name} read {r.value!r} at {r.partition}/{r.offset}, "
                                     "a value never sent"))
            continue
        txn, send = found
        read_values_of[txn.txn_id].add(r.value)
        if send.partition != r.partition:
            anomalies.append(Anomaly("wrong-partition", f"{name} read {r.value!r} of {txn.txn_id} in partition "
                                     f"{r.partition}; it was sent to {send.partition}"))
        if txn.final_outcome == Outcome.ABORTED:
            anomalies.append(Anomaly("aborted-read", f"{name} read {r.value!r} of aborted {txn.txn_id} at "
                                     f"{r.partition}/{r.offset}"))
        before = last_index.get((r.partition, txn.producer))
        if before is not None and send.index < before.index:
            anomalies.append(Anomaly("reordered", f"{name} read {r.value!r} (send {send.index} of "
                                     f"{txn.producer}) after {before.value!r} (send {before.index}) in partition "
                                     f"{r.partition}"))
        last_index[(r.partition, txn.producer)] = send
    for value, places in offsets_of.items():
        if len(places) > 1:
            anomalies.append(Anomaly("duplicate", f"{name} read {value!r} at {sorted(places)}"))
    if reader.complete:
        anomalies += _check_whole(history.txns, name, read_values_of)
    return anomalies


def _check_whole(txns: Iterable[Txn], name: str, read_values_of: dict[str, set[bytes]]) -> list[Anomaly]:
    """A reader that read to the end: every committed value, and all or none of every other transaction."""
    anomalies: list[Anomaly] = []
    for txn in txns:
        values = {s.value for s in txn.sends}
        seen = read_values_of.get(txn.txn_id, set())
        missing = values - seen
        if not missing:
            continue
        if txn.final_outcome == Outcome.COMMITTED:
            anomalies.append(Anomaly("lost-write", f"{name} never read {sorted(missing)} of committed "
                                     f"{txn.txn_id}"))
        if seen:
            anomalies.append(Anomaly("torn", f"{name} read {sorted(seen)} of {txn.final_outcome.value} "
                                     f"{txn.txn_id} but not {sorted(missing)}"))
    return anomalies


def _check_offsets_agree(readers: Iterable[Reader]) -> list[Anomaly]:
    at: dict[tuple[int, int], tuple[str, bytes]] = {}
    anomalies: list[Anomaly] = []
    for reader in readers:
        for r in reader.reads:
            first = at.setdefault((r.partition, r.offset), (reader.name, r.value))
            if first[1] != r.value:
                anomalies.append(Anomaly("inconsistent-offset", f"{first[0]} read {first[1]!r} at "
                                         f"{r.partition}/{r.offset}, {reader.name} read {r.value!r}"))
    return anomalies


def _check_outcomes_agree(visible_per_reader: dict[str, set[str]]) -> list[Anomaly]:
    anomalies: list[Anomaly] = []
    names = sorted(visible_per_reader)
    for a, b in itertools.pairwise(names):
        differ = visible_per_reader[a] ^ visible_per_reader[b]
        if differ:
            anomalies.append(Anomaly("inconsistent-outcome", f"{a} and {b} disagree on whether "
                                     f"{sorted(differ)} are visible"))
    return anomalies


def _check_group_offsets(txns: Iterable[Txn], visible: set[str], group_offsets: Mapping[str, int]) -> list[Anomaly]:
    """Each group's offset is that of its last transaction whose records are visible (or none, if none is)."""
    anomalies: list[Anomaly] = []
    by_group: dict[str, dict[int, Txn]] = defaultdict(dict)
    for txn in txns:
        if txn.offsets is not None:
            by_group[txn.offsets[0]][txn.offsets[1]] = txn

    def is_visible(txn: Txn) -> bool:
        return txn.final_outcome == Outcome.COMMITTED or txn.txn_id in visible

    for group, offsets in sorted(by_group.items()):
        held = group_offsets.get(group, -1)
        owner = offsets.get(held)
        if held >= 0 and owner is None:
            anomalies.append(Anomaly("offsets-unknown", f"{group} holds offset {held}, no transaction's"))
            continue
        if owner is not None and not is_visible(owner):
            anomalies.append(Anomaly("offsets-of-invisible", f"{group} holds offset {held} of "
                                     f"{owner.final_outcome.value} {owner.txn_id}, whose records are not visible"))
        later = [t.txn_id for offset, t in sorted(offsets.items()) if offset > held and is_visible(t)]
        if later:
            anomalies.append(Anomaly("offsets-lost", f"{group} holds offset {held}, but the records of the later "
                                     f"{later} are visible"))
    return anomalies
