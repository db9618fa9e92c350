"""Combining state batches: a newer write's batches over the stored ones (Kafka's PersisterStateBatchCombiner).

A share partition writes only the batches that changed; the coordinator keeps
the whole picture. Where a newer batch overlaps a stored one, the newer wins
for the overlapping offsets; the stored batch keeps its offsets outside the
overlap. Offsets below the share-partition start offset are done and dropped.
Neighbouring batches with the same state and delivery count are merged, so the
same state always gives the same batches.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.share.persister import PersisterStateBatch


def _without(batches: list[PersisterStateBatch], first: int, last: int) -> list[PersisterStateBatch]:
    """``batches`` with the offsets ``first..last`` cut out."""
    kept = []
    for b in batches:
        if b.last_offset < first or b.first_offset > last:
            kept.append(b)
            continue
        if b.first_offset < first:
            kept.append(PersisterStateBatch(b.first_offset, first - 1, b.delivery_state, b.delivery_count))
        if b.last_offset > last:
            kept.append(PersisterStateBatch(last + 1, b.last_offset, b.delivery_state, b.delivery_count))
    return kept


def _pruned(batches: Iterable[PersisterStateBatch], start_offset: int) -> list[PersisterStateBatch]:
    """The batches' offsets at or above ``start_offset`` (a start offset of -1 prunes nothing)."""
    kept = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = PersisterStateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        kept.append(b)
    return kept


def _merged(batches: list[PersisterStateBatch]) -> tuple[PersisterStateBatch, ...]:
    out: list[PersisterStateBatch] = []
    for b in sorted(batches, key=lambda b: b.first_offset):
        prev = out[-1] if out else None
        if (prev is not None and prev.last_offset + 1 == b.first_offset and prev.delivery_state == b.delivery_state
                and prev.delivery_count == b.delivery_count):
            out[-1] = PersisterStateBatch(prev.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        else:
            out.append(b)
    return tuple(out)


def combine_state_batches(stored: Iterable[PersisterStateBatch], newer: Iterable[PersisterStateBatch],
                          start_offset: int) -> tuple[PersisterStateBatch, ...]:
    """The stored batches overlaid by the newer ones (in order: a later one wins), pruned below
    ``start_offset``, sorted and merged."""
    batches = list(stored)
    for b in newer:
        if b.last_offset < b.first_offset:
            continue
        batches = _without(batches, b.first_offset, b.last_offset)
        batches.append(b)
    return _merged(_pruned(batches, start_offset))
