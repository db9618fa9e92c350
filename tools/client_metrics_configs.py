"""``pafka configs --entity-type client-metrics``: kafka-configs.sh's describe and alter of client-metrics
subscriptions (KIP-714).

    pafka configs --bootstrap-server H:P --alter --entity-type client-metrics --entity-name sub \\
        --add-config 'metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.],interval.ms=5000,match=[client_id=app.*]'
    pafka configs --bootstrap-server H:P --describe --entity-type client-metrics [--entity-name sub]

A bracketed value is a list (``[a,b]`` is sent as ``a,b``), as kafka-configs.sh sends it. Describe prints
the subscription's configs; without ``--entity-name`` it covers every subscription the broker lists
(ListClientMetricsResources). Alter sends IncrementalAlterConfigs: SET for each ``--add-config`` key,
DELETE for each ``--delete-config`` key; deleting every config removes the subscription. The lines
are kafka-configs.sh's.
"""

from __future__ import annotations

import click

from client.admin import AdminClient
from client.client import KafkaClient
from client.errors import check_error
from protocol.config_types import AlterConfigOp, ConfigResourceType
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from tools.common import fail

CLIENT_METRICS = "client-metrics"


def check_client_metrics_entities(types: list[str], names: list[str], alter: bool) -> None:
    """kafka-configs.sh's checks of a client-metrics entity: alone, named, never the default."""
    if len(types) > 1:
        fail("Only 'users' and 'clients' entity types may be specified together")
    if any(name == "" for name in names):
        fail("The default entity is not allowed for entity type client-metrics")
    if alter and not names:
        fail("an entity-name must be specified with --alter of client-metrics")


def list_client_metrics_resources(client: KafkaClient) -> list[str]:
    """The subscriptions' names (ListConfigResources v0, Kafka's ListClientMetricsResources)."""
    response = client.bootstrap_connection().request(ListConfigResourcesRequest(), version=0)
    assert isinstance(response, ListConfigResourcesResponse)
    check_error(response.error_code, api_name="ListClientMetricsResources")
    return sorted(resource.resource_name for resource in response.config_resources)


def _unbracketed(value: str) -> str:
    """kafka-configs.sh's list syntax: ``[a,b]`` is the list ``a,b``."""
    text = value.strip()
    return text[1:-1] if text.startswith("[") and text.endswith("]") else text


def describe_client_metrics_configs(client: KafkaClient, timeout_ms: int, name: str | None) -> None:
    admin = AdminClient(client, timeout_ms=timeout_ms)
    for subscription in [name] if name else list_client_metrics_resources(client):
        click.echo(f"Dynamic configs for client-metric {subscription} are:")
        entries = admin.describe_configs(ConfigResourceType.CLIENT_METRICS, subscription)
        for entry in sorted(entries.values(), key=lambda e: e.name):
            click.echo(f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} synonyms={{}}")


def alter_client_metrics_configs(client: KafkaClient, timeout_ms: int, name: str, added: dict[str, str],
                                 deleted: list[str]) -> None:
    admin = AdminClient(client, timeout_ms=timeout_ms)
    operations: list[tuple[str, AlterConfigOp, str | None]] = [
        (key, AlterConfigOp.SET, _unbracketed(value)) for key, value in added.items()]
    operations += [(key, AlterConfigOp.DELETE, None) for key in deleted]
    admin.incremental_alter_configs(ConfigResourceType.CLIENT_METRICS, name, operations)
    click.echo(f"Completed updating config for client-metric {name}.")
