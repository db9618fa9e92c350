"""pytest_pafka's ``pafka_prometheus``: a real Prometheus that scrapes what it is told to every second, evaluates
rule files, answers queries, and is gone (process and dir) after the test. It scrapes itself here, so no broker
is needed to check the harness.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_pafka.prometheus import PrometheusError, PrometheusProcess
from pytest_pafka.waiting import wait_until

RULES = """groups:
  - name: harness
    rules:
      - alert: AlwaysUp
        expr: up == 1
        for: 2s
"""


def test_it_scrapes_given_targets_every_second_and_answers_queries(pafka_prometheus: PrometheusProcess,
                                                                   tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(RULES)
    own = f"{pafka_prometheus.host}:{pafka_prometheus.port}"
    pafka_prometheus.scrape({own: {"broker_id": "7"}}, rule_files=[rules], job="self")
    (target,) = pafka_prometheus.wait_for_targets_up(1)
    assert target["labels"] == {"job": "self", "instance": own, "broker_id": "7"}
    assert target["scrapeInterval"] == "1s"
    assert pafka_prometheus.values('up{job="self"}', by="broker_id") == {"7": 1.0}
    # one sample a second: five seconds of scrapes are about five samples
    samples = wait_until(lambda: pafka_prometheus.scalar('count_over_time(up{job="self"}[5s])'), 15,
                         "five seconds of samples", until=lambda n: n is not None and n >= 4)
    assert samples is not None and samples <= 6
    firing = wait_until(lambda: pafka_prometheus.alerts("AlwaysUp"), 15, "the rule's alert firing",
                        until=lambda alerts: any(a["state"] == "firing" for a in alerts))
    assert firing[0]["labels"]["broker_id"] == "7"


def test_a_bad_query_or_configuration_is_an_error_naming_it(pafka_prometheus: PrometheusProcess,
                                                            tmp_path: Path) -> None:
    with pytest.raises(PrometheusError, match="bad_data"):
        pafka_prometheus.query("sum(")
    bad = tmp_path / "bad.yml"
    bad.write_text("groups: [{name: x, rules: [{alert: A, expr: 'sum('}]}]\n")
    with pytest.raises(PrometheusError, match=r"bad\.yml"):
        pafka_prometheus.scrape([], rule_files=[bad])
    assert pafka_prometheus.query("vector(1)")[0]["value"][1] == "1"


def test_the_process_and_its_dir_are_gone_after_it_stops() -> None:
    prometheus = PrometheusProcess()
    with prometheus:
        assert prometheus.process is not None and prometheus.dir is not None
        pid, directory = prometheus.process.pid, prometheus.dir
        assert prometheus.targets() == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not directory.exists()
