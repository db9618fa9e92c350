"""The fuzz targets (fuzz/): every seed passes, every crash found stays fixed, and a short
coverage-guided run per target family finds nothing (docs/fuzzing.md has the long run)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.make_corpus import CORPUS, seeds
from fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parents[2]
#: Executions per target in the test command; the documented run makes 1,000,000 or more.
SHORT_RUNS = int(os.environ.get("PAFKA_FUZZ_RUNS", "20000"))

#: Inputs that crashed a target once, by target: each raised something other than the
#: parser's own error (a KeyError out of a ZooKeeper reader).
REGRESSIONS: dict[str, list[bytes]] = {
    "zookeeper_json": [
        # /isr_change_notification and /admin/preferred_replica_election entries without "partition".
        b'\x09{"version":1,"partitions":[{"topic":"t","2artition":0}]}',
        b'\x07{"version":1,"partitions":[{"toric":"t","partition":0}]}',
        b'\x07{"version":1,"partitions":[7]}',
        # A version 1 broker registration without its host.
        b'\x02{"version":1,"port":9092,"timestamp":"1700000000000"}',
    ],
}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_seed_in_the_repository_passes_its_target(target: str) -> None:
    files = sorted((CORPUS / target).iterdir())
    assert files, f"no seeds for {target}"
    for path in files:
        TARGETS[target](path.read_bytes())


def test_the_corpus_holds_what_make_corpus_writes() -> None:
    for target, inputs in seeds().items():
        names = {p.name for p in (CORPUS / target).iterdir()}
        assert len(names) >= len(set(inputs)), target


@pytest.mark.parametrize(("target", "data"), [(t, d) for t, inputs in REGRESSIONS.items() for d in inputs])
def test_a_crashing_input_found_by_the_fuzzer_is_refused_as_bad_input(target: str, data: bytes) -> None:
    TARGETS[target](data)


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_short_coverage_guided_run_finds_no_crash(target: str, tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    found = tmp_path / "found"
    found.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "fuzz.run", target, f"-runs={SHORT_RUNS}", "-max_len=4096", "-timeout=10",
         "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/", str(found), str(CORPUS / target)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"Done {SHORT_RUNS} runs" in result.stderr
