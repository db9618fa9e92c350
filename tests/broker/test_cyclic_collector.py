"""The broker keeps CPython's cyclic collector off its request path (broker_command)."""

from __future__ import annotations

import gc

from broker import broker_command


def test_start_up_objects_are_frozen_and_young_collections_are_rarer() -> None:
    threshold = gc.get_threshold()
    try:
        gc.unfreeze()
        kept = [[i] for i in range(1000)]  # stands for what start-up built
        broker_command._tune_cyclic_collector()
        assert gc.get_freeze_count() >= len(kept)
        assert gc.get_threshold() == (broker_command.GC_YOUNG_THRESHOLD, threshold[1], threshold[2])
        assert broker_command.GC_YOUNG_THRESHOLD > 700  # CPython's default
        # Cycles made after start-up are still collected.
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
