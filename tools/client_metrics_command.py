"""``pafka client-metrics``: kafka-client-metrics.sh, the client-metrics subscriptions of KIP-714.

    pafka client-metrics --bootstrap-server H:P --alter --name sub \\
        --metrics org.apache.kafka.producer.,org.apache.kafka.consumer. --interval 5000 --match 'client_id=app.*'
    pafka client-metrics --bootstrap-server H:P --alter --generate-name --metrics '*'
    pafka client-metrics --bootstrap-server H:P --describe [--name sub]
    pafka client-metrics --bootstrap-server H:P --list
    pafka client-metrics --bootstrap-server H:P --delete --name sub

Alter sets the given configs (an empty value deletes one) with IncrementalAlterConfigs, delete removes
every config of the subscription, describe and list read DescribeConfigs and ListClientMetricsResources.
Options, checks and lines are kafka-client-metrics.sh's.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import click

from client.admin import AdminClient
from client.client import KafkaClient
from client.errors import KafkaClientError
from protocol.config_types import AlterConfigOp, ConfigResourceType
from tools.client_metrics_configs import list_client_metrics_resources
from tools.common import command_config_security, fail

_SPECIFIC_OPTIONS = ("generate_name", "interval", "match", "metrics")


def _check(action: str | None, name: str | None, options: dict[str, object]) -> None:
    """kafka-client-metrics.sh's checks, in its order."""
    if action is None:
        fail("Command must include exactly one action: --alter, --delete, --describe or --list.")
    given = [key for key in _SPECIFIC_OPTIONS if options[key]]
    if action in ("delete", "describe") and given:
        fail(f"Option \"[{action}]\" can't be used with option \"[{given[0].replace('_', '-')}]\"")
    if action == "list" and (name is not None or given):
        fail(f"Option \"[list]\" can't be used with option \"[{'name' if name is not None else given[0]}]\"")
    if action == "alter" and (name is not None) == bool(options["generate_name"]):
        fail("One of --name or --generate-name must be specified with --alter.")
    if action == "delete" and name is None:
        fail("A client metrics resource name must be specified with --delete.")


def _alter(admin: AdminClient, name: str, configs: dict[str, str]) -> None:
    operations: list[tuple[str, AlterConfigOp, str | None]] = [
        (key, AlterConfigOp.SET if value else AlterConfigOp.DELETE, value or None) for key, value in configs.items()]
    admin.incremental_alter_configs(ConfigResourceType.CLIENT_METRICS, name, operations)
    click.echo(f"Altered client metrics config for {name}.")


def _delete(admin: AdminClient, name: str) -> None:
    current = admin.describe_configs(ConfigResourceType.CLIENT_METRICS, name)
    admin.incremental_alter_configs(ConfigResourceType.CLIENT_METRICS, name,
                                    [(key, AlterConfigOp.DELETE, None) for key in current])
    click.echo(f"Deleted client metrics config for {name}.")


def _describe(client: KafkaClient, admin: AdminClient, name: str | None) -> None:
    for subscription in [name] if name is not None else list_client_metrics_resources(client):
        click.echo(f"Client metrics configs for {subscription} are:")
        for key, entry in admin.describe_configs(ConfigResourceType.CLIENT_METRICS, subscription).items():
            click.echo(f"  {key}={entry.value}")


@click.command("client-metrics")
@click.option("--bootstrap-server", required=True, help="REQUIRED: The Kafka server to connect to.")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Property file containing configs to be passed to Admin Client.")
@click.option("--alter", "action", flag_value="alter", help="Alter the configuration for the client metrics resource.")
@click.option("--delete", "action", flag_value="delete",
              help="Delete the configuration for the client metrics resource.")
@click.option("--describe", "action", flag_value="describe", help="List configurations for the client metrics resource.")
@click.option("--list", "action", flag_value="list", help="List the client metrics resources.")
@click.option("--name", help="Name of client metrics configuration resource.")
@click.option("--generate-name", is_flag=True, help="Generate a UUID to use as the name.")
@click.option("--interval", type=int, help="The metrics push interval in milliseconds.")
@click.option("--match", help="Matching selector 'k1=v1,k2=v2': client_id, client_instance_id, client_software_name, "
                              "client_software_version, client_source_address, client_source_port.")
@click.option("--metrics", help="Telemetry metric name prefixes 'm1,m2'.")
def client_metrics_command(bootstrap_server: str, command_config: Path | None, action: str | None, name: str | None,
                           generate_name: bool, interval: int | None, match: str | None, metrics: str | None) -> None:
    """Describe and alter client-metrics subscriptions (kafka-client-metrics.sh)."""
    _check(action, name, {"generate_name": generate_name, "interval": interval, "match": match, "metrics": metrics})
    configs = {key: value for key, value in (("interval.ms", None if interval is None else str(interval)),
                                             ("metrics", metrics), ("match", match)) if value is not None}
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-client-metrics", timeout=35,
                         security=command_config_security(command_config)) as client:
            admin = AdminClient(client, timeout_ms=30_000)
            if action == "alter":
                _alter(admin, name if name is not None else str(uuid.uuid4()), configs)
            elif action == "delete":
                assert name is not None
                _delete(admin, name)
            elif action == "describe":
                _describe(client, admin, name)
            else:
                click.echo("\n".join(list_client_metrics_resources(client)))
    except KafkaClientError as exc:
        fail(f"Error while executing client metrics command: {exc}")
    sys.stdout.flush()
