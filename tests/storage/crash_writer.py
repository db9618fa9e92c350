"""A writer process for the crash tests: appends deterministic batches until killed.

Usage: python -m tests.storage.crash_writer LOG_DIR SEED

Opens (and so recovers) the log dir through LogManager, resumes at batch
``logEndOffset // RECORDS``, prints ``ready <logEndOffset>``, then appends
batches, flushing every few of them. After each flush (fsync) and recovery
point checkpoint it prints ``fsynced <offset>``: every batch below that offset
must survive any kill from then on.
"""

from __future__ import annotations

import random
import sys

from protocol.records import Record, build_batch
from storage.log_config import LogConfig
from storage.log_manager import LogManager

RECORDS = 4
T0 = 1_700_000_000_000
TOPIC = "crash"
CONFIG = {"segment.bytes": 262144, "index.interval.bytes": 1024, "segment.index.bytes": 65536}


def value_size(k: int) -> int:
    return random.Random(k).choice([40, 300, 2000, 9000, 30000])


def timestamp(k: int, j: int) -> int:
    return T0 + k * 10 + j


def build(k: int) -> bytearray:
    """Batch number ``k``: RECORDS records, identical bytes every time it is built.

    Built with pafka's own encoder (kafka-python's import would slow every
    writer start); the test parses the files with kafka-python.
    """
    size = value_size(k)
    records = [
        Record(j, timestamp(k, j), f"key-{k % 97}".encode(), (f"{k}:{j}:".encode() * (size // 4 + 1))[:size])
        for j in range(RECORDS)
    ]
    return build_batch(records)


def main() -> None:
    log_dir, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    manager = LogManager([log_dir], LogConfig.model_validate(CONFIG), with_producer_state=False)
    manager.startup()
    log = manager.get_or_create_log(TOPIC, 0)
    k = log.log_end_offset // RECORDS
    print(f"ready {log.log_end_offset}", flush=True)
    while True:
        for _ in range(rng.randint(1, 6)):
            log.append_as_leader(build(k), leader_epoch=0)
            k += 1
        log.flush()
        manager.checkpoint_log_recovery_offsets()
        print(f"fsynced {log.recovery_point}", flush=True)


if __name__ == "__main__":
    main()
