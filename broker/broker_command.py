"""``pafka broker``: run one broker until SIGTERM or SIGINT.

Exactly two options, as Kafka's ``kafka-server-start.sh`` habits suggest: a
``server.properties`` file and ``--override key=value`` (repeatable).
Environment variables ``PAFKA_<PROPERTY>`` sit between the two.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import platform
import signal
import sys

import click

from broker.config.broker_config import load_broker_config

log = logging.getLogger("broker")

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
#: Allocations (of containers) between two young-generation collections; CPython's default is 700.
GC_YOUNG_THRESHOLD = 10_000
#: glibc's mallopt parameters (malloc.h) and the values the broker sets.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Blocks up to this size come from the heap and are reused, not mapped afresh: glibc's largest
#: accepted value on 64-bit (HEAP_MAX_SIZE / 2); the default starts at 128 KiB.
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free memory at the heap's top that glibc keeps instead of returning it to the kernel.
TRIM_THRESHOLD = 256 * 1024 * 1024


def _configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT, stream=sys.stderr)


async def run_broker(config_file: str | None, overrides: tuple[str, ...]) -> None:
    from broker.kafka_server import KafkaServer

    config = load_broker_config(config_file, overrides)
    if config.is_cluster_member:
        # Only a cluster member imports ZooKeeper's client and the controller.
        from broker.cluster.zk_broker import ZkBroker

        server = KafkaServer(config, await ZkBroker.connect(config))
    else:
        server = KafkaServer(config)
    _tune_allocator()
    await server.startup()
    _tune_cyclic_collector()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    # A second signal during shutdown ends the process at once, like Kafka's.
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: sys.exit(1))
    await server.shutdown()


def _tune_cyclic_collector() -> None:
    """Keep the cyclic garbage collector off the request path.

    What start-up built (codec modules, logs, indexes, groups) lives as long as the
    broker: ``gc.freeze`` takes it out of every later collection. A request allocates
    thousands of short-lived containers (a produce to 1,000 partitions decodes and
    answers one object per partition), and with the default threshold a collection ran
    every ~140 partitions, each walking objects the request still used: about 13% of the
    broker's CPU appending to 1,000 partitions (docs/benchmarks.md, "1,000-partition
    produce, second pass").
    Reference counting frees these objects; only cycles wait for the collector.
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def _tune_allocator() -> bool:
    """Keep the frames of large requests and responses in memory the process already touched.

    Every produce request and every fetch answer a follower reads is received into a frame of
    its own (protocol.framing), often 1 MiB. glibc serves blocks over 128 KiB with a fresh
    mmap and unmaps them on free, so each frame cost page faults and the kernel's zeroing of
    every page, on top of CPython's own zeroing: about 0.05 CPU-s of the three brokers' 0.5
    in a 1,000,000-record RF 3 produce (docs/benchmarks.md, "Cluster mode"). With these two
    settings a freed frame stays in the heap for the next one. What is kept is bounded by the
    largest working set the broker had, as it would be for a JVM's heap.
    True when set (glibc); other C libraries keep their own policy.
    """
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success; the mmap threshold first, as it also fixes the trim one.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def _run(coro_factory) -> None:  # type: ignore[no-untyped-def]
    try:
        import uvloop
    except ImportError:  # plain asyncio works, just slower
        asyncio.run(coro_factory())
    else:
        uvloop.run(coro_factory())


@click.command("broker")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="A server.properties file.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set a broker property, overriding the file and the environment (repeatable).")
def broker_command(config_file: str | None, overrides: tuple[str, ...]) -> None:
    """Run a pafka broker."""
    _configure_logging()
    _run(lambda: run_broker(config_file, overrides))
