"""Brokers for the benchmark suite: start pafka and the peer, and meter what they cost.

Every suite scenario runs against pafka and against the peer broker (Tansu, started by
the launcher script beside the project, ``../shared/bench/peer.py``, run as a separate
process; nothing is imported from it). pafka is started by the launcher the tests use,
``pytest_pafka.broker_process``, with bytecode allowed. A :class:`BenchBroker` knows its
bootstrap address and PID, so a :class:`ResourceMeter` can read its CPU seconds and peak
RSS from ``/proc`` around one measured phase.

    with start_pafka(data_dir) as pafka, start_peer() as peer:
        for broker in alternate(pafka, peer, repeats=3):
            with ResourceMeter(broker) as meter:
                ...  # drive the broker
            print(meter.cpu_s, meter.peak_rss_mb)
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pafka.broker_process import BrokerProcess
from pytest_pafka.ports import free_port, wait_until_listening

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PEER_LAUNCHER = REPO_ROOT.parent / "shared" / "bench" / "peer.py"
#: Where the peer launcher caches the peer's binary unless told otherwise.
SHARED_PEER_CACHE = Path(os.environ.get("PEER_CACHE", Path.home() / ".cache" / "pafka-peer"))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: A 1,000-partition restart after SIGKILL recovers every active segment: more than a test's bound.
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0


def proc_cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of ``pid`` so far (threads included)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def schedstat_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``'s live threads, to the nanosecond: the sum of their ``schedstat`` run
    times (``stat`` counts 10 ms clock ticks, too coarse for phases of tens of ms). Falls back to
    :func:`proc_cpu_seconds` where schedstat is missing."""
    if not Path(f"/proc/{pid}/schedstat").exists():
        return proc_cpu_seconds(pid)
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            with open(task / "schedstat") as stat:
                total += int(stat.read().split()[0])
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def proc_status_kb(pid: int, key: str) -> int:
    """A ``kB`` figure of ``/proc/PID/status`` (VmRSS, VmHWM, ...)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM (Linux >= 4.0: write 5 to clear_refs) so a phase reads its own peak."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


@dataclass
class BenchBroker:
    """A running broker the suite drives: its name, address, PID and how to stop it.

    pafka is a :class:`pytest_pafka.broker_process.BrokerProcess` (``launcher``); the peer is
    stopped through its launcher script (``stop_command``); a broker found by its port
    (``broker_ceiling.py --bootstrap``) is only metered, never stopped.
    """

    name: str
    host: str
    port: int
    pid: int
    launcher: BrokerProcess | None = None
    start_s: float = 0.0
    stop_command: Sequence[str] | None = None
    peer_cache: Path | None = None
    #: Client properties for this listener (security.protocol, sasl.*, ssl.*): merged into the
    #: benchmark clients' configs. Empty for a PLAINTEXT listener.
    client_config: Mapping[str, str] = field(default_factory=dict)
    #: Where topics are created and deleted, when not ``bootstrap`` (a PLAINTEXT listener of
    #: the same broker, so the admin client needs no credentials).
    admin_bootstrap: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path | None:
        return self.launcher.data_dir if self.launcher is not None else None

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)

    def rss_mb(self) -> float:
        return proc_status_kb(self.pid, "VmRSS") / 1024

    def alive(self) -> bool:
        if self.launcher is not None:
            return self.launcher.running
        try:
            os.kill(self.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.stop_command is not None:
            subprocess.run(list(self.stop_command), check=False, timeout=STOP_TIMEOUT_S,
                           env=_peer_env(self.peer_cache))
            if self.peer_cache is not None:
                shutil.rmtree(self.peer_cache, ignore_errors=True)
            return
        if self.launcher is not None:
            self.launcher.stop(sig)

    def __enter__(self) -> BenchBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: Run the pafka of another checkout (its path; it uses its own ``.venv`` if it has one),
#: to measure an older tree against this one with the same benchmark code.
PAFKA_TREE_ENV = "PAFKA_BENCH_TREE"


def bench_tree() -> Path | None:
    """The checkout ``PAFKA_BENCH_TREE`` names (resolved), or None for this one."""
    tree = os.environ.get(PAFKA_TREE_ENV)
    return Path(tree).resolve() if tree else None


def _pafka_env() -> dict[str, str]:
    # start-up is measured as a user sees it after `pip install`: with bytecode, which this
    # machine's PYTHONDONTWRITEBYTECODE would otherwise never let the broker write
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop(PAFKA_TREE_ENV, None)
    return env


def _running_pafka(launcher: BrokerProcess) -> BenchBroker:
    assert launcher.pid is not None
    return BenchBroker("pafka", launcher.host, launcher.port, launcher.pid, launcher, launcher.start_s)


def start_pafka(data_dir: Path | None = None, *, host: str = "127.0.0.1", port: int | None = None,
                overrides: Sequence[str] = (), log_path: Path | None = None) -> BenchBroker:
    """Start ``pafka broker`` on ``data_dir`` (a temp dir of its own if None, removed by
    :func:`remove_data`); returns once listening. Output goes to ``log_path`` (default:
    ``<data_dir>.log`` beside the data dir, or ``broker.log`` in the temp dir)."""
    launcher = BrokerProcess(*overrides, data_dir=data_dir, host=host, port=port, log_path=log_path,
                             env=_pafka_env(), start_timeout_s=START_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S,
                             tree=bench_tree())
    try:
        launcher.start()
    except BaseException:
        launcher.cleanup()
        raise
    return _running_pafka(launcher)


def restart_pafka(broker: BenchBroker, sig: signal.Signals = signal.SIGTERM) -> BenchBroker:
    """Stop ``broker`` with ``sig`` and start it again on the same data dir and port."""
    assert broker.launcher is not None, "only a pafka started here can be restarted"
    broker.launcher.restart(sig)
    return _running_pafka(broker.launcher)


def private_peer_cache() -> Path:
    """A cache dir of the peer launcher's own for one peer.

    The launcher keeps one PID file per cache dir and ``stop`` kills whatever PID it
    names, so two peers sharing a dir (two benchmarks on this machine) would stop each
    other's. The binary is linked from the shared cache, so nothing is downloaded again.
    """
    cache = Path(tempfile.mkdtemp(prefix="pafka-peer-cache-"))
    binary = SHARED_PEER_CACHE / "tansu"
    if binary.exists():
        (cache / "tansu").symlink_to(binary)
    return cache


def _peer_env(cache: Path | None) -> dict[str, str] | None:
    return None if cache is None else {**os.environ, "PEER_CACHE": str(cache)}


def start_peer(*, port: int | None = None, launcher: Path = DEFAULT_PEER_LAUNCHER) -> BenchBroker:
    """Start the peer broker through its launcher script (a separate process, its own cache dir)."""
    if not launcher.exists():
        raise FileNotFoundError(f"peer launcher not found: {launcher}")
    port = port or free_port()
    cache = private_peer_cache()
    started = time.monotonic()
    try:
        out = subprocess.run([sys.executable, str(launcher), "start", "--port", str(port)], env=_peer_env(cache),
                             capture_output=True, text=True, check=True, timeout=START_TIMEOUT_S)
        pid = int(out.stdout.strip().splitlines()[-1])
        wait_until_listening("127.0.0.1", port, None, START_TIMEOUT_S)
    except BaseException:
        shutil.rmtree(cache, ignore_errors=True)
        raise
    return BenchBroker("peer", "127.0.0.1", port, pid, start_s=time.monotonic() - started,
                       stop_command=[sys.executable, str(launcher), "stop"], peer_cache=cache)


def remove_data(broker: BenchBroker) -> None:
    """Stop a pafka started without a data dir of the caller's and remove its temp dir."""
    if broker.launcher is not None:
        broker.launcher.cleanup()


class ResourceMeter:
    """CPU seconds, peak RSS and wall time of one broker over a ``with`` block."""

    def __init__(self, broker: BenchBroker) -> None:
        self.broker = broker
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.peak_rss_mb: float | None = None

    def __enter__(self) -> ResourceMeter:
        self._peak_reset = reset_peak_rss(self.broker.pid)
        self._cpu0 = self.broker.cpu_seconds()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._t0
        self.cpu_s = self.broker.cpu_seconds() - self._cpu0
        if self._peak_reset:
            self.peak_rss_mb = proc_status_kb(self.broker.pid, "VmHWM") / 1024


def alternate(a: BenchBroker, b: BenchBroker, repeats: int) -> Iterator[BenchBroker]:
    """A B A B ...: noise on a shared machine hits both brokers alike."""
    for _ in range(repeats):
        yield a
        yield b


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def percentile(sorted_values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (``p`` in 0-100) of an already sorted sequence."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), int(-(-p * len(sorted_values) // 100))))
    return sorted_values[rank - 1]


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None
