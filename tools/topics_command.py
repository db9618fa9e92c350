"""``pafka topics``: kafka-topics.sh on pafka's client.

Kafka's option names and output. One convenience beyond kafka-topics.sh:
``--alter --topic T --add-config k=v --delete-config k`` changes topic configs
here too (Kafka moved that to kafka-configs.sh; it is sent as an
IncrementalAlterConfigs request, as kafka-configs.sh does). ``--topic`` names
a topic exactly; Kafka's regular-expression matching is not supported.
"""

from __future__ import annotations

import base64
import sys
from uuid import UUID

import click

from client import (
    AdminClient,
    KafkaClient,
    KafkaClientError,
    NoCompatibleVersionError,
    TopicAlreadyExistsError,
    TopicMetadata,
    UnknownTopicOrPartitionError,
)
from protocol.config_types import AlterConfigOp, ConfigResourceType, ConfigSource
from protocol.errors import ErrorCode
from tools.common import fail, parse_properties

_ACTIONS = ("create", "list", "describe", "alter", "delete")


def kafka_uuid(value: UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def format_topic_description(topic: TopicMetadata, configs: dict[str, str | None]) -> list[str]:
    """kafka-topics.sh --describe lines for one topic."""
    partitions = [topic.partitions[p] for p in sorted(topic.partitions)]
    replication_factor = len(partitions[0].replicas) if partitions else 0
    config_text = ",".join(f"{k}={'null' if v is None else v}" for k, v in configs.items())
    lines = [
        (f"Topic: {topic.name}\tTopicId: {kafka_uuid(topic.topic_id)}\tPartitionCount: {len(partitions)}\t"
         f"ReplicationFactor: {replication_factor}\tConfigs: {config_text}")
    ]
    for p in partitions:
        leader = "none" if p.leader < 0 else str(p.leader)
        line = (
            f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
        if p.offline_replicas:
            line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
        lines.append(line)
    return lines


def _non_default_configs(admin: AdminClient, topic: str) -> dict[str, str | None]:
    # Like kafka-topics.sh: show every config not at its default, whether
    # set on the topic or inherited from a static broker setting.
    try:
        entries = admin.describe_configs(ConfigResourceType.TOPIC, topic)
    except NoCompatibleVersionError:
        return {}  # a broker without DescribeConfigs: describe the rest anyway
    return {
        name: ("[hidden]" if e.is_sensitive else e.value)
        for name, e in entries.items()
        if e.source != ConfigSource.DEFAULT_CONFIG
    }


def _create(admin: AdminClient, topic: str, partitions: int | None, rf: int | None, configs: dict[str, str],
            if_not_exists: bool) -> None:
    try:
        admin.create_topic(topic, -1 if partitions is None else partitions, -1 if rf is None else rf, configs)
    except TopicAlreadyExistsError:
        if if_not_exists:
            return
        raise
    click.echo(f"Created topic {topic}.")


def _list(admin: AdminClient, exclude_internal: bool) -> None:
    for name in admin.list_topics(include_internal=not exclude_internal):
        click.echo(name)


def _describe(client: KafkaClient, admin: AdminClient, topic: str | None, exclude_internal: bool, if_exists: bool) -> None:
    cluster = client.refresh_metadata(None if topic is None else [topic])
    if topic is not None:
        meta = cluster.topics.get(topic)
        if meta is None or meta.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            if if_exists:
                return
            raise UnknownTopicOrPartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=f"Topic '{topic}' does not exist as expected")
        selected = [meta]
    else:
        selected = [t for _, t in sorted(cluster.topics.items()) if not (exclude_internal and t.is_internal)]
    for meta in selected:
        for line in format_topic_description(meta, _non_default_configs(admin, meta.name)):
            click.echo(line)


def _alter(
    admin: AdminClient, topic: str, partitions: int | None, add_config: dict[str, str], delete_config: tuple[str, ...]
) -> None:
    if partitions is None and not add_config and not delete_config:
        fail("--alter needs --partitions, --add-config or --delete-config")
    if partitions is not None:
        admin.create_partitions({topic: partitions})
    if add_config or delete_config:
        ops: list[tuple[str, AlterConfigOp, str | None]] = [(k, AlterConfigOp.SET, v) for k, v in add_config.items()]
        ops += [(k, AlterConfigOp.DELETE, None) for k in delete_config]
        admin.incremental_alter_configs(ConfigResourceType.TOPIC, topic, ops)
        click.echo(f"Completed updating config for topic {topic}.")


def _delete(admin: AdminClient, topic: str, if_exists: bool) -> None:
    try:
        admin.delete_topic(topic)
    except UnknownTopicOrPartitionError:
        if not if_exists:
            raise


@click.command("topics")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--create", "action", flag_value="create", help="Create a new topic.")
@click.option("--list", "action", flag_value="list", help="List all available topics.")
@click.option("--describe", "action", flag_value="describe", help="Describe one topic, or all.")
@click.option("--alter", "action", flag_value="alter", help="Add partitions to, or change configs of, a topic.")
@click.option("--delete", "action", flag_value="delete", help="Delete a topic.")
@click.option("--topic", help="The topic (an exact name).")
@click.option("--partitions", type=click.IntRange(min=1), help="Partition count (create: the broker default if omitted).")
@click.option("--replication-factor", type=click.IntRange(min=1), help="Replication factor (the broker default if omitted).")
@click.option("--config", "configs", multiple=True, metavar="K=V", help="A topic config for --create.")
@click.option("--add-config", "add_configs", multiple=True, metavar="K=V", help="Set a topic config (--alter).")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="K", help="Remove a topic config (--alter).")
@click.option("--if-exists", is_flag=True, help="With --alter/--delete/--describe: do nothing if the topic is absent.")
@click.option("--if-not-exists", is_flag=True, help="With --create: do nothing if the topic exists.")
@click.option("--exclude-internal", is_flag=True, help="Leave internal topics out of --list/--describe.")
@click.option("--timeout-ms", type=int, default=30_000, show_default=True, help="Request timeout.")
def topics_command(
    bootstrap_server: str,
    action: str | None,
    topic: str | None,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    add_configs: tuple[str, ...],
    delete_configs: tuple[str, ...],
    if_exists: bool,
    if_not_exists: bool,
    exclude_internal: bool,
    timeout_ms: int,
) -> None:
    """Create, list, describe, alter and delete topics (kafka-topics.sh)."""
    if action is None:
        fail("Command must include exactly one action: --create, --list, --describe, --alter or --delete")
    if action in ("create", "alter", "delete") and not topic:
        fail(f"--{action} requires --topic")
    topic_configs = parse_properties(configs, "--config")
    added = parse_properties(add_configs, "--add-config")
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-topics", timeout=timeout_ms / 1000 + 5) as client:
            admin = AdminClient(client, timeout_ms=timeout_ms)
            if action == "create":
                _create(admin, topic, partitions, replication_factor, topic_configs, if_not_exists)  # type: ignore[arg-type]
            elif action == "list":
                _list(admin, exclude_internal)
            elif action == "describe":
                _describe(client, admin, topic, exclude_internal, if_exists)
            elif action == "alter":
                try:
                    _alter(admin, topic, partitions, added, delete_configs)  # type: ignore[arg-type]
                except UnknownTopicOrPartitionError:
                    if not if_exists:
                        raise
            else:
                _delete(admin, topic, if_exists)  # type: ignore[arg-type]
    except KafkaClientError as exc:
        fail(f"Error while executing topic command : {exc}")
    sys.stdout.flush()
