"""A real Prometheus for tests: Debian's ``prometheus`` (2.42) run as a plain process on loopback.

    with PrometheusProcess() as prometheus:           # started here, stopped (by PID) and removed at the end
        prometheus.scrape({"127.0.0.1:9404": {"broker_id": "1"}}, rule_files=[rules])
        prometheus.wait_for_targets_up(1)
        prometheus.query("sum(kafka_controller_kafkacontroller_activecontrollercount)")

``PrometheusProcess`` writes its ``prometheus.yml`` into a temp dir (scrape and rule evaluation every
second, so a test sees a change within a couple of seconds), keeps its TSDB there, listens on a free
127.0.0.1 port and is asked about everything through its HTTP API (``/api/v1/...``). :meth:`scrape`
rewrites the configuration and reloads it through ``/-/reload`` (the lifecycle API is on), which answers
only once the new configuration is in force, or with the reason it was refused.

It is never run as the Debian package's systemd service: that one listens on :9090 and keeps its data in
/var/lib/prometheus, neither of which a test should touch.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_pafka.ports import free_port
from pytest_pafka.waiting import wait_until

PROMETHEUS = "prometheus"
PROMTOOL = "promtool"
INSTALL_HINT = ("Prometheus is not installed: apt-get install prometheus (Debian's package, which brings promtool; "
                "the tests run it as a plain process, never as the service)")
#: Scrape and rule evaluation interval: one second, so tests wait seconds, not minutes.
INTERVAL = "1s"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 5.0

#: Targets: addresses (``host:port``), or a mapping of each address to the labels its series get.
Targets = Iterable[str] | Mapping[str, Mapping[str, str]]


def prometheus_available() -> bool:
    return shutil.which(PROMETHEUS) is not None and shutil.which(PROMTOOL) is not None


class PrometheusError(RuntimeError):
    """Prometheus refused a request (a bad query, a configuration it would not load)."""


def render_config(jobs: Mapping[str, Targets], rule_files: Sequence[Path], metrics_path: str = "/metrics") -> str:
    """``prometheus.yml`` as JSON (a subset of YAML): each job scraping its targets every second."""
    config: dict[str, Any] = {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL, "scrape_timeout": INTERVAL},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [{
            "job_name": job,
            "metrics_path": metrics_path,
            "static_configs": [{"targets": [address], "labels": labels}
                               for address, labels in _as_mapping(targets).items()],
        } for job, targets in jobs.items()],
    }
    return json.dumps(config, indent=2) + "\n"


def _as_mapping(targets: Targets) -> dict[str, dict[str, str]]:
    if isinstance(targets, Mapping):
        return {address: dict(labels) for address, labels in targets.items()}
    return {address: {} for address in targets}


class PrometheusProcess:
    """One Prometheus server on ``host:port`` with its configuration and TSDB in a temp dir."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.start_timeout_s = start_timeout_s
        self.dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        assert self.dir is not None, "Prometheus is not started"
        return self.dir / "prometheus.yml"

    def __enter__(self) -> PrometheusProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- life cycle --------------------------------------------------------------------------------------
    def start(self) -> PrometheusProcess:
        """Start with nothing to scrape; :meth:`scrape` says what to scrape."""
        if not prometheus_available():
            raise RuntimeError(INSTALL_HINT)
        self.dir = Path(tempfile.mkdtemp(prefix="pafka-prometheus-"))
        self.config_path.write_text(render_config({}, []))
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self) -> None:
        assert self.dir is not None and self.process is None
        log = open(self.dir / "prometheus.log", "ab")  # the child process writes to it
        try:
            self.process = subprocess.Popen(
                [PROMETHEUS, f"--config.file={self.config_path}", f"--storage.tsdb.path={self.dir / 'data'}",
                 f"--web.listen-address={self.host}:{self.port}", "--web.enable-lifecycle",
                 "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.dir,
            )
        finally:
            log.close()
        wait_until(self._ready, self.start_timeout_s, f"Prometheus did not become ready on {self.url}",
                   details=self.log_tail, ignoring=(OSError,))

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"Prometheus exited with {self.process.returncode}: {self.log_tail()}")
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1.0) as response:
            return bool(response.status == 200)

    def stop(self) -> None:
        """SIGTERM the server by its PID (SIGKILL after a grace period) and remove its dir."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=STOP_TIMEOUT_S)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def log_tail(self, lines: int = 30) -> str:
        if self.dir is None or not (self.dir / "prometheus.log").exists():
            return ""
        return "\n".join((self.dir / "prometheus.log").read_text("utf-8", "replace").splitlines()[-lines:])

    # -- configuration -----------------------------------------------------------------------------------
    def scrape(self, targets: Targets, rule_files: Iterable[Path] = (), job: str = "pafka") -> None:
        """Scrape ``targets`` every second (and evaluate ``rule_files``) from now on, instead of before."""
        self.scrape_jobs({job: targets}, rule_files)

    def scrape_jobs(self, jobs: Mapping[str, Targets], rule_files: Iterable[Path] = ()) -> None:
        """Scrape each job's targets (a cluster a job, say) every second, and evaluate ``rule_files``."""
        rules = [Path(path).resolve() for path in rule_files]
        self.config_path.write_text(render_config(jobs, rules))
        try:
            self._request("POST", "/-/reload")
        except PrometheusError as exc:
            # the answer names only the config file; the log says which rule file or line was refused
            raise PrometheusError(f"{exc}\n{self.log_tail(5)}") from exc

    # -- HTTP API ----------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, params: Mapping[str, str] | None = None) -> bytes:
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        request = urllib.request.Request(url, method=method)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                body: bytes = response.read()
                return body
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"{method} {path}: {exc.code} {exc.read().decode('utf-8', 'replace')}") from exc

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of ``GET /api/v1/<path>`` (a PrometheusError if its status is not success)."""
        answer = json.loads(self._request("GET", f"/api/v1/{path}", params))
        if answer.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector: ``[{"metric": {labels}, "value": [time, "text"]}, ...]``."""
        data = self.api("query", query=expr)
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr!r} is a {data['resultType']}, not a vector")
        result: list[dict[str, Any]] = data["result"]
        return result

    def values(self, expr: str, by: str) -> dict[str, float]:
        """An instant query's values keyed by label ``by`` (``{"1": 0.0, "2": 3.0}`` by ``broker_id``)."""
        return {sample["metric"].get(by, ""): float(sample["value"][1]) for sample in self.query(expr)}

    def scalar(self, expr: str) -> float | None:
        """The one value ``expr`` has now, or None when its vector is empty."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) > 1:
            raise PrometheusError(f"{expr!r} has {len(result)} series, not one: {result}")
        return float(result[0]["value"][1])

    def targets(self) -> list[dict[str, Any]]:
        """The active targets as ``/api/v1/targets`` lists them (``scrapeUrl``, ``health``, ``lastError``...)."""
        active: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return active

    def wait_for_targets_up(self, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Wait until ``count`` targets have been scraped successfully; returns them."""
        def up() -> list[dict[str, Any]]:
            return [t for t in self.targets() if t["health"] == "up"]

        return wait_until(up, timeout, f"{count} Prometheus targets up", until=lambda ts: len(ts) >= count,
                          details=lambda: json.dumps(self.targets(), indent=1))

    def alerts(self, name: str | None = None) -> list[dict[str, Any]]:
        """The alerts pending or firing now (``labels``, ``state``, ``activeAt``...), of ``name`` if given."""
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return [a for a in alerts if name is None or a["labels"].get("alertname") == name]


def check_rules(*rule_files: Path) -> subprocess.CompletedProcess[str]:
    """``promtool check rules``: exit status 0 and "SUCCESS" for each file when they are valid."""
    if not prometheus_available():
        raise RuntimeError(INSTALL_HINT)
    return subprocess.run([PROMTOOL, "check", "rules", *map(str, rule_files)], capture_output=True, text=True,
                          timeout=60, check=False)
