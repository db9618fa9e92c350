"""``pafka log-dirs``: kafka-log-dirs.sh on pafka's client.

    --describe --bootstrap-server HOST:PORT [--broker-list 0,1] [--topic-list a,b] [--command-config FILE]

Asks each broker (all of the cluster's, or those listed) for its log dirs and prints them as Kafka's
LogDirsCommand does: two progress lines, then one line of JSON. The JSON's keys come in the order
Kafka's tool writes them (its maps are hash maps), brokers, log dirs and partitions sorted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from client import KafkaClient, KafkaClientError
from client.admin import AdminClient
from client.log_dirs import LogDirDescription, ReplicaInfo
from tools.common import command_config_security, fail


def _split(value: str) -> list[str]:
    return [item for item in value.split(",") if item]


def _partition_json(topic: str, partition: int, replica: ReplicaInfo) -> dict[str, Any]:
    return {"partition": f"{topic}-{partition}", "size": replica.size, "offsetLag": replica.offset_lag,
            "isFuture": replica.is_future}


def _log_dir_json(description: LogDirDescription, topics: set[str]) -> dict[str, Any]:
    partitions = [_partition_json(t, p, replica) for (t, p), replica in sorted(description.replicas.items())
                  if not topics or t in topics]
    return {"partitions": partitions, "error": description.error_class_name, "logDir": description.path}


def format_as_json(described: Mapping[int, Mapping[str, LogDirDescription]], topics: set[str]) -> str:
    """Kafka's ``{"brokers":[{"broker":..,"logDirs":[..]}],"version":1}``, on one line."""
    brokers = [{"broker": broker_id,
                "logDirs": [_log_dir_json(d, topics) for _, d in sorted(described[broker_id].items())]}
               for broker_id in sorted(described)]
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"), ensure_ascii=False)


def _brokers_to_query(client: KafkaClient, broker_list: str) -> list[int]:
    cluster = sorted(client.refresh_metadata([]).brokers)
    try:
        wanted = sorted({int(b) for b in _split(broker_list)})
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--broker-list") from exc
    missing = [b for b in wanted if b not in cluster]
    if missing:
        fail(f"ERROR: The given brokers do not exist from --broker-list: {','.join(map(str, missing))}. "
             f"Current existent brokers: {','.join(map(str, cluster))}")
    return wanted or cluster


@click.command("log-dirs")
@click.option("--bootstrap-server", required=True, metavar="host:port",
              help="REQUIRED: the server(s) to use for bootstrapping")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Property file containing configs to be passed to Admin Client.")
@click.option("--describe", is_flag=True, help="Describe the specified log directories on the specified brokers.")
@click.option("--topic-list", default="", metavar="Topic list",
              help='The list of topics to be queried in the form "topic1,topic2,topic3". '
                   "All topics will be queried if no topic list is specified")
@click.option("--broker-list", default="", metavar="Broker list",
              help='The list of brokers to be queried in the form "0,1,2". '
                   "All brokers in the cluster will be queried if no broker list is specified")
def log_dirs_command(bootstrap_server: str, command_config: Path | None, describe: bool, topic_list: str,
                     broker_list: str) -> None:
    """Query log directory usage on the brokers (kafka-log-dirs.sh)."""
    if not describe:
        raise click.UsageError('Missing required argument "[describe]"')
    security = command_config_security(command_config)
    try:
        with KafkaClient(bootstrap_server, client_id="log-dirs-tool", security=security) as client:
            brokers = _brokers_to_query(client, broker_list)
            click.echo("Querying brokers for log directories information")
            described = AdminClient(client).describe_log_dirs(brokers)
    except KafkaClientError as exc:
        fail(str(exc))
    click.echo(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    click.echo(format_as_json(described, set(_split(topic_list))))
