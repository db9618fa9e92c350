"""A real pafka broker process on loopback, for tests and benchmarks alike.

    with BrokerProcess("delete.topic.enable=false") as broker:   # started here, cleaned up at the end
        broker.restart()                  # SIGTERM, then start on the same data dir and port
        broker.restart(signal.SIGKILL)    # a crash: no shutdown work at all
        print(broker.log_text())          # every start's output, in order

    broker = BrokerProcess(data_dir=root / "data", env=env).start()   # a benchmark's broker
    broker.start_s                        # seconds from launch until it accepted a connection

The process is always ended by its own PID (the signal asked for, then SIGKILL after a grace
period), and a broker that does not come up is killed before the error is raised. Without a
``data_dir`` the broker gets a temp dir of its own (data in ``data/``, output in ``broker.log``)
that :meth:`BrokerProcess.cleanup` removes; a ``data_dir`` given by the caller stays the
caller's, and the output is appended to ``log_path`` (default: ``<data_dir>.log`` beside it).

The broker is the installed pafka's (``python -P -m broker``), run in its data dir's
parent; ``tree=`` runs another checkout's instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from client.client_security import ClientSecurity
from pytest_pafka.ports import free_port, wait_until_listening

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
#: How much of the broker's output a start-up error quotes.
LOG_TAIL_CHARS = 20_000


class BrokerProcess:
    """One broker with its own data dir; may be stopped and started again on the same port."""

    def __init__(self, *overrides: str, data_dir: Path | None = None, host: str = "127.0.0.1",
                 port: int | None = None, log_path: Path | None = None, env: Mapping[str, str] | None = None,
                 start_timeout_s: float = START_TIMEOUT_S, stop_timeout_s: float = STOP_TIMEOUT_S,
                 tree: Path | None = None) -> None:
        self._own_dir: Path | None = None
        #: A pafka checkout to run instead of the installed pafka, with its own ``.venv`` if it has
        #: one: benchmarks compare an older tree against this one on the same machine.
        self.tree = tree
        if data_dir is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix="pafka-broker-"))
            data_dir = self._own_dir / "data"
            log_path = log_path or self._own_dir / "broker.log"
        self.data_dir = data_dir
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}.log"
        self.host = host
        self.port = port or free_port(host)
        #: prometheus.metrics.port: a free one of its own, so that brokers on one host never collide on
        #: the default (an override in ``overrides`` wins); may be changed between starts.
        self.metrics_port = free_port(host)
        #: ``key=value`` server properties, passed as ``--override``; may be changed between starts.
        self.overrides = list(overrides)
        #: The broker's environment (None: this process's).
        self.env = dict(env) if env is not None else None
        #: Kafka client properties a client needs on this broker's listener (``security.protocol`` and
        #: its settings); empty: PLAINTEXT. The caller that changes the listener sets them.
        self.client_properties: dict[str, str] = {}
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        #: Seconds from launch until the last start accepted a connection.
        self.start_s = 0.0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def bootstrap_servers(self) -> str:
        """``host:port``, what a client's ``bootstrap.servers`` says."""
        return self.bootstrap

    @property
    def metrics_url(self) -> str:
        """The broker's Prometheus endpoint (``/livez`` and ``/readyz`` sit beside it)."""
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def client_security(self) -> ClientSecurity:
        """TLS and SASL for pafka's own client on this broker's listener (none for PLAINTEXT)."""
        return ClientSecurity.from_properties(self.client_properties)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        if self.tree is None:
            # -P: the working directory does not go on sys.path, so a package of the application
            # under test cannot shadow one of pafka's. ``-m broker`` imports none of the CLI's tools.
            launcher = [sys.executable, "-P", "-m", "broker"]
        else:
            launcher = _tree_launcher(self.tree)
        args = [*launcher,
                "--override", f"log.dirs={self.data_dir}",
                "--override", f"listeners=PLAINTEXT://{self.host}:{self.port}",
                "--override", f"prometheus.metrics.port={self.metrics_port}"]
        for item in self.overrides:
            args += ["--override", item]
        return args

    def log_text(self) -> str:
        """Everything the broker wrote to stdout and stderr, over all its starts."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> BrokerProcess:
        """Launch and return once the listener accepts connections."""
        if self.running:
            raise RuntimeError("broker already running")
        self.starts += 1
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)  # the broker's working directory
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.tree or self.data_dir.parent, env=self.env)
        try:
            self.start_s = wait_until_listening(self.host, self.port, self.process, self.start_timeout_s)
        except (RuntimeError, TimeoutError) as exc:
            self.kill()
            raise RuntimeError(f"pafka broker on {self.bootstrap} did not start: {exc}\n"
                               f"{self.log_text()[-LOG_TAIL_CHARS:]}") from exc
        return self

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send ``sig`` and wait; SIGKILL if the broker outlives the grace period. The exit code."""
        proc = self.process
        if proc is None:
            return 0
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            try:
                proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=self.stop_timeout_s)
        return proc.returncode

    def terminate(self) -> int:
        """SIGTERM and wait for the clean shutdown; SIGKILL if it hangs. The exit code."""
        return self.stop(signal.SIGTERM)

    def kill(self) -> int:
        """SIGKILL: a crash, no shutdown work at all."""
        return self.stop(signal.SIGKILL)

    def restart(self, sig: signal.Signals = signal.SIGTERM) -> BrokerProcess:
        """Stop with ``sig`` and start again on the same data dir and port."""
        self.stop(sig)
        return self.start()

    def cleanup(self) -> None:
        """Kill the broker and remove the temp dir it was given (a caller's ``data_dir`` stays)."""
        try:
            self.kill()
        finally:
            if self._own_dir is not None:
                shutil.rmtree(self._own_dir, ignore_errors=True)

    def __enter__(self) -> BrokerProcess:
        """Start; on failure, clean up before the error goes on."""
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _tree_launcher(tree: Path) -> list[str]:
    """How another checkout (one a benchmark compares against) starts its broker: with its own venv,
    through ``python -m broker`` where it has one, else through its console script."""
    venv_python = tree / ".venv" / "bin" / "python"
    python = str(venv_python) if venv_python.exists() else sys.executable
    if (tree / "broker" / "__main__.py").exists():
        return [python, "-m", "broker"]
    console_script = tree / ".venv" / "bin" / "pafka"
    return [str(console_script), "broker"] if console_script.exists() else [python, "-m", "tools", "broker"]
