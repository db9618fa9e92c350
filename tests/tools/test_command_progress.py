"""Progress of long commands on stderr (plain lines when stderr is no terminal, as here), stdout unchanged."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import tools.dump_log
from client import KafkaClient
from pytest_pafka.broker_process import BrokerProcess
from storage.log import Log
from storage.log_config import LogConfig
from tests.storage.helpers import make_batch
from tools.cli import main


def test_dump_log_of_a_large_segment_reports_its_progress_on_stderr(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig.model_validate({}))
    for i in range(50):
        log.append_as_leader(make_batch(5, seed=i, value_size=200), leader_epoch=0)
    log.close()
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    size = segment.stat().st_size
    plain = CliRunner().invoke(main, ["dump-log", "--files", str(segment)])
    assert plain.exit_code == 0 and plain.stderr == ""  # a small segment: no progress
    monkeypatch.setattr(tools.dump_log, "LARGE_SEGMENT_BYTES", size)
    large = CliRunner().invoke(main, ["dump-log", "--files", str(segment)])
    assert large.exit_code == 0, large.output
    assert large.stdout == plain.stdout
    lines = large.stderr.splitlines()
    mib = f"{size / (1 << 20):.1f} MiB"
    assert lines[0] == f"Dumping 00000000000000000000.log: 0.0 MiB of {mib} (0.0%) started after 0.0s"
    assert lines[-1].startswith(f"Dumping 00000000000000000000.log: {mib} of {mib} (100.0%) done after ")


def test_console_producer_from_a_file_reports_how_much_it_read(pafka_broker: BrokerProcess, tmp_path: Path) -> None:
    source = tmp_path / "records.txt"
    source.write_bytes(b"".join(b"record %d %s\n" % (i, b"x" * 100) for i in range(5000)))
    size = source.stat().st_size
    with open(source, "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "tools", "console-producer", "--bootstrap-server",
                               pafka_broker.bootstrap, "--topic", "from-file"], stdin=stdin, capture_output=True,
                              timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    mib = f"{size / (1 << 20):.1f} MiB"
    assert lines[0] == f"Producing {source}: 0.0 MiB of {mib} (0.0%) started after 0.0s", lines
    assert lines[-1].startswith(f"Producing {source}: {mib} of {mib} (100.0%) done after "), lines
    with KafkaClient(pafka_broker.bootstrap) as client:
        assert client.latest_offset("from-file", 0) == 5000


def test_console_producer_from_a_pipe_prints_nothing_more(pafka_broker: BrokerProcess) -> None:
    done = subprocess.run([sys.executable, "-m", "tools", "console-producer", "--bootstrap-server",
                           pafka_broker.bootstrap, "--topic", "from-pipe"], input=b"a\nb\n", capture_output=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and done.stdout == b"" and done.stderr == b"", done.stderr.decode()


def test_a_broker_restarted_after_a_crash_logs_its_recovery_progress(pafka_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": pafka_broker.bootstrap})
    for i in range(100):
        producer.produce("recovered", b"%d" % i)
    assert producer.flush(30) == 0
    pafka_broker.restart(signal.SIGKILL)
    recovery = [line for line in pafka_broker.log_text().splitlines() if "Recovering logs in" in line]
    assert any("started after" in line for line in recovery), recovery
    assert any(re.search(r"Recovering logs in \S+: (\d+) of \1 logs \(100\.0%\) done after", line)
               for line in recovery), recovery
