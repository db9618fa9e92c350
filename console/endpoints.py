"""Where each broker's Prometheus endpoint is.

In order: the URL the operator gave for that broker; the port the operator gave for every broker; the
port the broker itself reports in its ``prometheus.metrics.port`` config (pafka's brokers do, through
DescribeConfigs; a Kafka broker knows no such config and says nothing); the JMX exporter's usual 9404.
Always on the host the broker advertises. A broker's port is asked once and remembered.
"""

from __future__ import annotations

from client.admin import AdminClient
from client.client import KafkaClient
from client.errors import KafkaClientError
from protocol.config_types import ConfigResourceType

#: The Strimzi/JMX-exporter convention's port, tried on every broker's host unless told otherwise.
DEFAULT_METRICS_PORT = 9404

_PORT, _ENABLE = "prometheus.metrics.port", "prometheus.metrics.enable"


class MetricsEndpoints:
    """The metrics URL of every broker of the cluster ``client`` is connected to (blocking: the client's thread)."""

    def __init__(self, client: KafkaClient, *, port: int | None = None, explicit: dict[int, str] | None = None) -> None:
        self.client = client
        self.port = port
        self.explicit = dict(explicit or {})
        self._reported: dict[int, int | None] = {}

    def reported_port(self, node_id: int) -> int | None:
        """The port the broker's own config names; None when it names none, serves none, or cannot say."""
        if node_id not in self._reported:
            try:
                configs = AdminClient(self.client).describe_configs(ConfigResourceType.BROKER, str(node_id), [_PORT, _ENABLE])
            except KafkaClientError:
                return None  # asked again next time: the broker may be back
            port, enabled = configs.get(_PORT), configs.get(_ENABLE)
            serving = enabled is None or (enabled.value or "").lower() != "false"
            # Port 0 is an ephemeral port the broker chose: the config does not say which.
            number = int(port.value) if port is not None and port.value and port.value.isdigit() else 0
            self._reported[node_id] = number if serving and number > 0 else None
        return self._reported[node_id]

    def urls(self) -> dict[int, str]:
        out = {}
        for node_id, broker in sorted(self.client.refresh_metadata([]).brokers.items()):
            if node_id in self.explicit:
                out[node_id] = self.explicit[node_id]
                continue
            port = self.port or self.reported_port(node_id) or DEFAULT_METRICS_PORT
            out[node_id] = f"http://{broker.host}:{port}/metrics"
        return out
