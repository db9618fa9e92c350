"""A cluster member's ZooKeeper session: its state, state changes and request latency (Kafka's
SessionExpireListener and ZooKeeperClientMetrics)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from broker.metrics.families import Timer, counter, gauge
from controller.zk.zk_session import ZooKeeperSession

#: kazoo's connection states; the current one reads 1, the others 0 (alert on CONNECTED == 0).
SESSION_STATES = ("CONNECTING", "CONNECTED", "SUSPENDED", "LOST")


class ZooKeeperMetricsCollector:
    def __init__(self, session: ZooKeeperSession) -> None:
        self.session = session

    def collect(self) -> Iterator[Metric]:
        session = self.session
        state = gauge("kafka_server_sessionexpirelistener_sessionstate",
                      "kafka.server:type=SessionExpireListener,name=SessionState (1 for the current state)")
        for name in SESSION_STATES:
            state.add(int(session.state == name), state=name)
        yield state.metric
        for name, value in (("ZooKeeperExpires", session.expires), ("ZooKeeperDisconnects", session.disconnects),
                            ("ZooKeeperSyncConnects", session.connects)):
            yield counter(f"kafka_server_sessionexpirelistener_{name.lower()}",
                          f"kafka.server:type=SessionExpireListener,name={name}PerSec").add(value).metric
        yield Timer("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
                    "kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs").add(
            list(session.request_times_ms), session.requests).metric
