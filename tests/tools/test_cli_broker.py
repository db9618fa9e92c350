"""pafka topics / console-producer / console-consumer as processes against a real broker."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from client import KafkaClient, partition_for_key
from pytest_pafka.broker_process import BrokerProcess
from tools.cli import main
from tools.console_producer import CODECS


@dataclass
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes


def pafka(*args: str, stdin: bytes | None = None) -> Ran:
    """Run a pafka command in this process (the tools' startup is mostly imports)."""
    result = CliRunner().invoke(main, list(args), input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout_bytes, result.stderr_bytes)


def pafka_process(*args: str, stdin: bytes | None = None, timeout: float = 60) -> Ran:
    """Run the real ``pafka`` entry point as a process: real stdin/stdout pipes."""
    done = subprocess.run(
        [sys.executable, "-m", "tools", *args], input=stdin, capture_output=True, timeout=timeout
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def topics(broker: BrokerProcess, *args: str) -> Ran:
    return pafka("topics", "--bootstrap-server", broker.bootstrap, *args)


def produce(broker: BrokerProcess, topic: str, lines: bytes, *args: str) -> None:
    done = pafka("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *args, stdin=lines)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""


def consume(broker: BrokerProcess, topic: str, *args: str) -> Ran:
    done = pafka("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *args)
    assert done.returncode == 0, done.stderr.decode()
    return done


# ------------------------------------------------------------ pafka topics

def test_create_list_describe(broker: BrokerProcess) -> None:
    created = topics(broker, "--create", "--topic", "cli-orders", "--partitions", "3", "--replication-factor", "1")
    assert (created.returncode, created.stdout) == (0, b"Created topic cli-orders.\n")
    assert b"cli-orders\n" in topics(broker, "--list").stdout

    lines = topics(broker, "--describe", "--topic", "cli-orders").stdout.decode().splitlines()
    assert re.fullmatch(
        r"Topic: cli-orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: .*", lines[0]
    ), lines[0]
    assert lines[1:] == [f"\tTopic: cli-orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]
    everything = topics(broker, "--describe").stdout.decode()
    assert "Topic: cli-orders\tTopicId:" in everything

    again = topics(broker, "--create", "--topic", "cli-orders", "--partitions", "3")
    assert again.returncode == 1
    assert b"TOPIC_ALREADY_EXISTS" in again.stderr and again.stderr.startswith(b"Error while executing topic command : ")
    assert topics(broker, "--create", "--topic", "cli-orders", "--if-not-exists").returncode == 0


def test_usage_errors(broker: BrokerProcess) -> None:
    assert topics(broker, "--create").returncode == 1  # no --topic
    assert topics(broker).returncode == 1  # no action
    missing = topics(broker, "--describe", "--topic", "nope")
    assert missing.returncode == 1 and b"UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    assert topics(broker, "--describe", "--topic", "nope", "--if-exists").returncode == 0


def test_alter_partitions(broker: BrokerProcess) -> None:
    assert topics(broker, "--create", "--topic", "cli-grow", "--partitions", "1").returncode == 0
    altered = topics(broker, "--alter", "--topic", "cli-grow", "--partitions", "4")
    assert altered.returncode == 0, altered.stderr
    lines = topics(broker, "--describe", "--topic", "cli-grow").stdout.decode().splitlines()
    assert "PartitionCount: 4" in lines[0] and len(lines) == 5
    shrink = topics(broker, "--alter", "--topic", "cli-grow", "--partitions", "2")
    assert shrink.returncode == 1 and b"INVALID_PARTITIONS" in shrink.stderr


def test_delete(broker: BrokerProcess) -> None:
    assert topics(broker, "--create", "--topic", "cli-doomed").returncode == 0
    deleted = topics(broker, "--delete", "--topic", "cli-doomed")
    assert deleted.returncode == 0, deleted.stderr
    assert b"cli-doomed\n" not in topics(broker, "--list").stdout
    assert topics(broker, "--delete", "--topic", "cli-doomed").returncode == 1
    assert topics(broker, "--delete", "--topic", "cli-doomed", "--if-exists").returncode == 0


def test_topic_configs(broker: BrokerProcess) -> None:
    created = topics(
        broker, "--create", "--topic", "cli-conf", "--config", "cleanup.policy=compact", "--config", "retention.ms=1234"
    )
    assert created.returncode == 0, created.stderr

    def configs() -> str:
        first = topics(broker, "--describe", "--topic", "cli-conf").stdout.decode().splitlines()[0]
        return first.split("\tConfigs: ")[1]

    assert {"cleanup.policy=compact", "retention.ms=1234"} <= set(configs().split(","))
    altered = topics(
        broker, "--alter", "--topic", "cli-conf", "--add-config", "retention.ms=999", "--delete-config", "cleanup.policy"
    )
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout == b"Completed updating config for topic cli-conf.\n"
    now = set(configs().split(","))
    assert "retention.ms=999" in now and not any(c.startswith("cleanup.policy=") for c in now)
    bad = topics(broker, "--create", "--topic", "cli-bad-conf", "--config", "cleanup.policy=sometimes")
    assert bad.returncode == 1 and b"INVALID_CONFIG" in bad.stderr


# ------------------------------------------------------------ console producer -> console consumer

LINES = (
    "h1:v1,h2:v2\tkey1\tvalue1\n"
    "\tkey2\tvalue two\n"
    "h3:,h4\tkey3\t\n"
    "lang:ru\tключ\tзначение\tс табом\n"
    "h5:x:y\tkey5\tlast line without newline"
).encode()

EXPECTED = (
    "Partition:0\tOffset:0\th1:v1,h2:v2\tkey1\tvalue1\n"
    "Partition:0\tOffset:1\tNO_HEADERS\tkey2\tvalue two\n"
    "Partition:0\tOffset:2\th3:,h4:null\tkey3\t\n"
    "Partition:0\tOffset:3\tlang:ru\tключ\tзначение\tс табом\n"
    "Partition:0\tOffset:4\th5:x:y\tkey5\tlast line without newline\n"
).encode()

READ_PROPS = ("--property", "parse.key=true", "--property", "parse.headers=true")
PRINT_PROPS = tuple(
    arg for p in ("print.partition", "print.offset", "print.headers", "print.key") for arg in ("--property", f"{p}=true")
)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_keys_and_headers_round_trip(broker: BrokerProcess, codec: str) -> None:
    topic = f"cli-lines-{codec}"
    assert topics(broker, "--create", "--topic", topic, "--partitions", "1").returncode == 0
    before = int(time.time() * 1000)
    produce(broker, topic, LINES, *READ_PROPS, "--compression-codec", codec, "--producer-property", "acks=all")
    after = int(time.time() * 1000)
    with KafkaClient(broker.bootstrap) as client:
        batches = client.fetch(topic, 0, 0).batches
    assert {b.header.compression_type for b in batches} == {CODECS[codec]}
    done = consume(broker, topic, "--from-beginning", "--max-messages", "5", *PRINT_PROPS)
    assert done.stdout == EXPECTED
    assert done.stderr.endswith(b"Processed a total of 5 messages\n")

    stamped = consume(
        broker, topic, "--from-beginning", "--timeout-ms", "500", "--property", "print.timestamp=true"
    ).stdout.decode().splitlines()
    assert len(stamped) == 5
    for line in stamped:
        kind, _, rest = line.partition(":")
        assert kind == "CreateTime" and before <= int(rest.split("\t")[0]) <= after


def test_keys_spread_as_kafka_partitions_them(broker: BrokerProcess) -> None:
    topic = "cli-keyed"
    assert topics(broker, "--create", "--topic", topic, "--partitions", "3").returncode == 0
    keys = [f"user-{i}" for i in range(30)]
    produce(broker, topic, "".join(f"{k}\t{i}\n" for i, k in enumerate(keys)).encode(), "--property", "parse.key=true")
    done = consume(
        broker, topic, "--from-beginning", "--max-messages", "30", "--property", "print.partition=true",
        "--property", "print.key=true", "--property", "key.separator=|",
    )
    rows = [line.split("|") for line in done.stdout.decode().splitlines()]
    assert sorted(int(value) for _, _, value in rows) == list(range(30))
    for partition, key, _ in rows:
        assert partition == f"Partition:{partition_for_key(key.encode(), 3)}"
    # Within each partition the records come back in the order they were produced.
    for p in range(3):
        values = [int(v) for part, _, v in rows if part == f"Partition:{p}"]
        assert values == sorted(values)


def test_offsets_partition_and_limits(broker: BrokerProcess) -> None:
    topic = "cli-offsets"
    assert topics(broker, "--create", "--topic", topic, "--partitions", "2").returncode == 0
    produce(broker, topic, b"".join(b"m%d\n" % i for i in range(10)), "--sync")
    # Keyless records go to one partition per batch; --sync makes each line a batch.
    per_partition = {
        p: consume(broker, topic, "--partition", str(p), "--offset", "earliest", "--timeout-ms", "500").stdout
        for p in (0, 1)
    }
    assert sorted((per_partition[0] + per_partition[1]).split()) == sorted(b"m%d" % i for i in range(10))
    fuller = max((0, 1), key=lambda p: len(per_partition[p]))
    tail = consume(broker, topic, "--partition", str(fuller), "--offset", "2", "--timeout-ms", "500")
    assert tail.stdout.split() == per_partition[fuller].split()[2:]
    assert tail.stderr.endswith(b"Processed a total of %d messages\n" % len(tail.stdout.split()))

    limited = consume(broker, topic, "--from-beginning", "--max-messages", "3")
    assert len(limited.stdout.split()) == 3 and limited.stderr.endswith(b"Processed a total of 3 messages\n")
    # Default start is the end of the log: nothing new arrives, so the timeout ends it.
    started = time.monotonic()
    idle = consume(broker, topic, "--timeout-ms", "500")
    assert idle.stdout == b"" and idle.stderr.endswith(b"Processed a total of 0 messages\n")
    assert time.monotonic() - started >= 0.5


def test_producer_rejects_bad_lines(broker: BrokerProcess) -> None:
    assert topics(broker, "--create", "--topic", "cli-strict", "--partitions", "1").returncode == 0
    done = pafka(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", "cli-strict",
        "--property", "parse.key=true", stdin=b"k\tgood\nno separator here\n",
    )
    assert done.returncode == 1
    assert b"No key separator found on line number 2: 'no separator here'" in done.stderr
    # The line before the bad one was sent.
    assert consume(broker, "cli-strict", "--from-beginning", "--timeout-ms", "1000").stdout == b"good\n"


def test_real_processes_with_pipes(broker: BrokerProcess) -> None:
    """The installed entry point end to end: stdin pipe in, stdout pipe out."""
    topic = "cli-processes"
    assert topics(broker, "--create", "--topic", topic, "--partitions", "1").returncode == 0
    produced = pafka_process(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *READ_PROPS,
        "--compression-codec", "lz4", stdin=LINES,
    )
    assert (produced.returncode, produced.stdout) == (0, b""), produced.stderr
    consumed = pafka_process(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", "5", *PRINT_PROPS,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == EXPECTED
    assert consumed.stderr.endswith(b"Processed a total of 5 messages\n")


def test_producer_lets_the_broker_auto_create_the_topic(broker: BrokerProcess) -> None:
    # auto.create.topics.enable defaults to true, as in Kafka.
    produce(broker, "cli-auto-created", b"first\nsecond\n")
    assert b"cli-auto-created\n" in topics(broker, "--list").stdout
    done = consume(broker, "cli-auto-created", "--from-beginning", "--max-messages", "2")
    assert sorted(done.stdout.split()) == [b"first", b"second"]


def test_bare_compression_codec_means_gzip_and_log_append_time_is_printed(broker: BrokerProcess) -> None:
    topic = "cli-append-time"
    created = topics(broker, "--create", "--topic", topic, "--config", "message.timestamp.type=LogAppendTime")
    assert created.returncode == 0, created.stderr
    produce(broker, topic, b"one\n", "--compression-codec")
    with KafkaClient(broker.bootstrap) as client:
        (batch,) = client.fetch(topic, 0, 0).batches
    assert batch.header.compression_type == CODECS["gzip"]
    line = consume(broker, topic, "--from-beginning", "--max-messages", "1", "--property", "print.timestamp=true").stdout
    assert line == b"LogAppendTime:%d\tone\n" % batch.records[0].timestamp


def test_interactive_producer_sends_each_line_after_linger_and_consumer_stops_on_sigint(
    broker: BrokerProcess,
) -> None:
    topic = "cli-interactive"
    assert topics(broker, "--create", "--topic", topic).returncode == 0
    command = [sys.executable, "-m", "tools"]
    producer = subprocess.Popen(
        [*command, "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--timeout", "20"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    consumer = subprocess.Popen(
        [*command, "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    # readline() below blocks: a watchdog kills both if a line never comes.
    watchdog = threading.Timer(60, lambda: [p.kill() for p in (producer, consumer)])
    watchdog.start()
    try:
        assert producer.stdin is not None and consumer.stdout is not None
        for word in (b"hello", b"world"):
            producer.stdin.write(word + b"\n")
            producer.stdin.flush()
            # The producer is still running: the line must arrive on its own.
            assert consumer.stdout.readline() == word + b"\n"
        producer.stdin.close()
        assert producer.wait(timeout=30) == 0
        consumer.send_signal(signal.SIGINT)
        _, err = consumer.communicate(timeout=30)
        assert consumer.returncode == 0
        assert err.endswith(b"Processed a total of 2 messages\n")
    finally:
        watchdog.cancel()
        for proc in (producer, consumer):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
