"""Record batch build/decode throughput: protocol.records against kafka-python's codec.

Run: .venv/bin/python benchmarks/micro/bench_record_batches.py [--seconds 0.5]

Each case builds or decodes one 1,000-record batch repeatedly for about the
given time (per case) and prints records per second. kafka-python 3.0.12
(pure Python as well) is the peer measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import time
import warnings
from collections.abc import Callable

from protocol import compression
from protocol.records import Record, build_batch, iter_records

warnings.filterwarnings("ignore", category=DeprecationWarning)
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402

RECORDS_PER_BATCH = 1000


def _records() -> list[Record]:
    rng = random.Random(7)
    return [
        Record(
            i,
            1_700_000_000_000 + 3 * i,
            b"key-%d" % i,
            rng.randbytes(50) + b"v" * 50,
            [("trace-id", b"0123456789abcdef")] if i % 4 == 0 else [],
        )
        for i in range(RECORDS_PER_BATCH)
    ]


def _rate(action: Callable[[], object], seconds: float) -> float:
    """Records per second for ``action`` (one batch per call), run for about ``seconds``."""
    action()  # warm up
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        action()
        calls += 1
    return calls * RECORDS_PER_BATCH / (time.perf_counter() - start)


def _kafka_python_build(records: list[Record], codec: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 24)
    for record in records:
        builder.append(record.offset, record.timestamp, record.key, record.value, record.headers)
    return builder.build()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per case")
    args = parser.parse_args()
    records = _records()
    print(f"{'codec':8} {'operation':8} {'pafka rec/s':>12} {'kafka-python rec/s':>19} {'ratio':>6}")
    for codec in (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
        ours = bytes(build_batch(records, compression=codec))
        # Each case is timed within its loop pass; the default arguments only say so.
        build_ours = _rate(lambda codec=codec: build_batch(records, compression=codec), args.seconds)
        build_theirs = _rate(lambda codec=codec: _kafka_python_build(records, codec), args.seconds)
        decode_ours = _rate(lambda ours=ours: list(iter_records(ours, verify_crc=True)), args.seconds)

        def decode_theirs(ours: bytes = ours) -> None:
            batch = DefaultRecordBatch(ours)
            batch.validate_crc()
            list(batch)

        decode_theirs_rate = _rate(decode_theirs, args.seconds)
        name = compression.codec_name(codec)
        print(f"{name:8} {'build':8} {build_ours:12,.0f} {build_theirs:19,.0f} {build_ours / build_theirs:6.2f}")
        print(f"{name:8} {'decode':8} {decode_ours:12,.0f} {decode_theirs_rate:19,.0f} {decode_ours / decode_theirs_rate:6.2f}")


if __name__ == "__main__":
    main()
