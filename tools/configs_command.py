"""``pafka configs``: kafka-configs.sh for client quotas, users' SCRAM credentials, groups' configs and
client-metrics subscriptions.

    pafka configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152'
    pafka configs --bootstrap-server H:P --alter --entity-type clients --entity-default --delete-config producer_byte_rate
    pafka configs --bootstrap-server H:P --alter --ip 10.0.0.1 --add-config connection_creation_rate=10
    pafka configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    pafka configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice | --entity-default]
    pafka configs --bootstrap-server H:P --alter --entity-type groups --entity-name g \\
        --add-config consumer.session.timeout.ms=60000 [--delete-config consumer.heartbeat.interval.ms]
    pafka configs --bootstrap-server H:P --describe [--all] --entity-type groups [--entity-name g]

Entities are Kafka's ConfigCommand's: ``--entity-type users|clients|ips`` (users and clients may be
given together), each paired in order with an ``--entity-name`` or ``--entity-default``, or the
shorthands ``--user``, ``--client``, ``--ip``, ``--user-defaults``, ``--client-defaults``,
``--ip-defaults``. Quota keys go to AlterClientQuotas and DescribeClientQuotas; SCRAM-SHA-* keys of a
user go to AlterUserScramCredentials (the password is salted here, in ``client.admin``, and never
reaches the broker), never both in one command, as kafka-configs.sh refuses. ``--entity-type groups``
goes to DescribeConfigs and IncrementalAlterConfigs (``tools.group_configs``), as does
``--entity-type client-metrics`` (``tools.client_metrics_configs``). The messages and output
lines are kafka-configs.sh's. ``--command-config FILE`` holds the client's properties
(``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``). Topic and broker
configs are the ``topics`` command's and the admin API's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from broker.config.broker_config import parse_properties as parse_properties_file
from client.admin import AdminClient
from client.client import KafkaClient
from client.errors import KafkaClientError
from client.quota_admin import QuotaAdmin
from client.scram import DEFAULT_ITERATIONS, ScramMechanism
from tools.client_metrics_configs import (
    CLIENT_METRICS,
    alter_client_metrics_configs,
    check_client_metrics_entities,
    describe_client_metrics_configs,
)
from tools.common import command_config_security, fail
from tools.group_configs import GROUPS, alter_group_configs, check_group_entities, describe_group_configs
from tools.quota_configs import (
    Entities,
    alter_quotas,
    check_entities,
    describe_filter,
    describe_quotas,
    scram_configs_allowed,
)

#: Kafka's ConfigCommand splits --add-config on commas outside square brackets.
_TOP_LEVEL_COMMA = re.compile(r",(?=[^\]]*(?:\[|$))")
#: Kafka's validatePropsKey: what a config key may be made of.
_VALID_KEY = re.compile(r"[a-zA-Z0-9._-]*")
#: Where parse_args leaves the command-line order of --entity-name and --entity-default.
_NAME_ORDER = "pafka.configs.name_order"
#: Kafka's shorthand entity flags, in the order its ConfigCommandOptions lists them (types and names
#: are paired in this order).
_NAMED_FLAGS = (("client", "clients"), ("user", "users"), ("ip", "ips"))
_DEFAULT_FLAGS = (("client_defaults", "clients"), ("user_defaults", "users"), ("ip_defaults", "ips"))


def parse_configs_to_add(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a=1,b=2]`` as Kafka's ConfigCommand reads it (brackets kept in the value)."""
    configs: dict[str, str] = {}
    for item in _TOP_LEVEL_COMMA.split(text.strip()):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"Invalid entity config: all configs to be added must be in the format "
                                     f"\"key=val\" ({key.strip() or item!r})", param_hint="--add-config")
        configs[key.strip()] = value.strip()
    return configs


def scram_upsertion(user: str, mechanism_name: str, value: str) -> tuple[str, ScramMechanism, str, int]:
    """``SCRAM-SHA-256=[iterations=8192,password=...]``: the upsertion (the password stays in the tuple)."""
    mechanism = ScramMechanism.for_name(mechanism_name)
    if mechanism is None:
        raise click.BadParameter(f"Unknown SCRAM mechanism {mechanism_name}", param_hint="--add-config")
    fields = dict(part.split("=", 1) for part in value.strip("[]").split(",") if "=" in part)
    if "password" not in fields:
        raise click.BadParameter(f"{mechanism_name} needs password=<password>", param_hint="--add-config")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise click.BadParameter(f"{mechanism_name}: iterations must be a number", param_hint="--add-config") from None
    return user, mechanism, fields["password"], iterations


class _ConfigsCommand(click.Command):
    """Keeps the order of --entity-name and --entity-default, which click's options lose: Kafka pairs
    the i-th of them with the i-th --entity-type."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_NAME_ORDER] = _name_or_default_order(self, args)
        return super().parse_args(ctx, args)


def _name_or_default_order(command: click.Command, args: list[str]) -> list[str]:
    """``"name"`` or ``"default"`` per --entity-name / --entity-default, in command-line order."""
    takes_value = {opt for param in command.params if isinstance(param, click.Option) and not param.is_flag
                   for opt in param.opts}
    order = []
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            break
        option = token.split("=", 1)[0]
        if option == "--entity-name":
            order.append("name")
        elif option == "--entity-default":
            order.append("default")
        if option in takes_value and "=" not in token:
            next(tokens, None)  # the option's value, whatever it looks like
    return order


def _entities(options: dict[str, Any], name_order: list[str]) -> Entities:
    """Types and names as Kafka's ConfigCommandOptions.entityTypes / entityNames list them."""
    names_given = iter(options["entity_names"])
    names = [next(names_given, "") if kind == "name" else "" for kind in name_order]
    types = list(options["entity_types"])
    for flag, entity_type in _NAMED_FLAGS:
        if options[flag] is not None:
            types.append(entity_type)
            names.append(options[flag])
    for flag, entity_type in _DEFAULT_FLAGS:
        if options[flag]:
            types.append(entity_type)
            names.append("")
    uses_generic = bool(options["entity_types"] or options["entity_names"] or options["entity_default"])
    uses_shorthand = any(options[flag] is not None for flag, _ in _NAMED_FLAGS) or any(
        options[flag] for flag, _ in _DEFAULT_FLAGS)
    if uses_generic and uses_shorthand:
        fail("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    return Entities(types, names)


def _check_alter_options(entities: Entities, add_config: str | None, add_config_file: Path | None,
                         delete_configs: tuple[str, ...]) -> None:
    """The rest of Kafka's checks of an --alter, in its order, before anything is parsed or sent."""
    if add_config is not None and add_config_file is not None:
        fail("Only one of --add-config or --add-config-file must be specified")
    if add_config is None and add_config_file is None and not delete_configs:
        fail("At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter")
    if len(entities.types) != len(entities.names):
        fail("An entity name must be specified for every entity type")


def _configs_to_add(add_config: str | None, add_config_file: Path | None) -> dict[str, str]:
    if add_config_file is not None:
        added = dict(parse_properties_file(add_config_file.read_text()))
    else:
        added = parse_configs_to_add(add_config) if add_config else {}
    for key in added:
        if not _VALID_KEY.fullmatch(key):
            fail(f"Invalid character found for config key: {key}")
    return added


def _configs_to_delete(delete_configs: tuple[str, ...]) -> list[str]:
    # Kafka's --delete-config takes 'k1,k2' and may be repeated.
    return [name.strip() for item in delete_configs for name in item.split(",") if name.strip()]


def _describe_scram(admin: AdminClient, user: str | None) -> None:
    try:
        described = admin.describe_user_scram_credentials(None if user is None else [user])
    except KafkaClientError as exc:
        if "does not exist" not in str(exc):
            raise
        described = {}  # a user without credentials: nothing to print, as kafka-configs.sh
    for name, infos in sorted(described.items()):
        text = ", ".join(f"{mechanism.mechanism_name}=iterations={iterations}" for mechanism, iterations in infos)
        click.echo(f"SCRAM credential configs for user-principal '{name}' are {text}")


def _alter_scram(admin: AdminClient, user: str, added: dict[str, str], deleted: list[str]) -> None:
    upsertions = [scram_upsertion(user, name, value) for name, value in added.items()]
    deletions = []
    for name in deleted:
        mechanism = ScramMechanism.for_name(name)
        if mechanism is None:
            raise click.BadParameter(f"{name} is no SCRAM mechanism", param_hint="--delete-config")
        deletions.append((user, mechanism))
    admin.alter_user_scram_credentials(upsertions, deletions)


def _completed(entities: Entities) -> str:
    head_type, head_name = entities.types[0], entities.names[0]
    if head_name:
        return f"Completed updating config for {head_type[:-1]} {head_name}."
    return f"Completed updating default config for {head_type} in the cluster."


def _describe(client: KafkaClient, timeout_ms: int, entities: Entities) -> None:
    components = describe_filter(entities)  # checked before connecting, as kafka-configs.sh does
    with client:
        describe_quotas(QuotaAdmin(client), components)
        # kafka-configs.sh lists SCRAM credentials too for users alone, named or all, never defaults.
        if entities.types == ["users"] and "" not in entities.names:
            _describe_scram(AdminClient(client, timeout_ms=timeout_ms), entities.names[0] if entities.names else None)


def _alter(client: KafkaClient, timeout_ms: int, entities: Entities, added: dict[str, str],
           deleted: list[str]) -> None:
    scram = scram_configs_allowed(entities, added, deleted)  # checked before connecting, as kafka-configs.sh does
    with client:
        if scram:
            _alter_scram(AdminClient(client, timeout_ms=timeout_ms), entities.names[0], added, deleted)
        else:
            alter_quotas(QuotaAdmin(client), entities, added, deleted)
    click.echo(_completed(entities))


def _groups(client: KafkaClient, timeout_ms: int, action: str, entities: Entities, describe_all: bool,
            changes: tuple[dict[str, str], list[str]]) -> None:
    with client:
        if action == "describe":
            describe_group_configs(client, timeout_ms, entities.names[0] if entities.names else None, describe_all)
        else:
            alter_group_configs(client, timeout_ms, entities.names[0], *changes)


def _client_metrics(client: KafkaClient, timeout_ms: int, action: str, entities: Entities,
                    changes: tuple[dict[str, str], list[str]]) -> None:
    with client:
        if action == "describe":
            describe_client_metrics_configs(client, timeout_ms, entities.names[0] if entities.names else None)
        else:
            alter_client_metrics_configs(client, timeout_ms, entities.names[0], *changes)


@click.command("configs", cls=_ConfigsCommand)
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*.")
@click.option("--alter", "action", flag_value="alter", help="Alter the configs of an entity.")
@click.option("--describe", "action", flag_value="describe", help="List the configs of an entity or all.")
@click.option("--entity-type", "entity_types", type=click.Choice(["users", "clients", "ips", "groups", CLIENT_METRICS]),
              multiple=True, help="users, clients, ips, groups or client-metrics; users and clients may be given "
                                  "together (a user's clients).")
@click.option("--entity-name", "entity_names", multiple=True,
              help="A user principal, client id or IP, paired in order with the --entity-type options.")
@click.option("--entity-default", is_flag=True, help="The default entity, in place of an --entity-name.")
@click.option("--user", help="The user's principal name (--entity-type users --entity-name USER).")
@click.option("--client", help="The client's ID (--entity-type clients --entity-name CLIENT).")
@click.option("--ip", help="The IP address (--entity-type ips --entity-name IP).")
@click.option("--user-defaults", is_flag=True, help="The config defaults for all users.")
@click.option("--client-defaults", is_flag=True, help="The config defaults for all clients.")
@click.option("--ip-defaults", is_flag=True, help="The config defaults for all IPs.")
@click.option("--add-config", help="'producer_byte_rate=1048576,consumer_byte_rate=2097152' or "
                                   "'SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]'.")
@click.option("--add-config-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A properties file with the configs to add.")
@click.option("--delete-config", "delete_configs", multiple=True, help="Config keys to remove: 'k1,k2'.")
@click.option("--all", "describe_all", is_flag=True,
              help="With --describe of groups: every config, the broker's defaults included.")
@click.option("--timeout-ms", type=int, default=30_000, show_default=True, help="Request timeout.")
def configs_command(bootstrap_server: str, command_config: Path | None, action: str | None, timeout_ms: int,
                    add_config: str | None, add_config_file: Path | None, delete_configs: tuple[str, ...],
                    describe_all: bool, **entity_options: Any) -> None:
    """Describe and alter client quotas, users' SCRAM credentials, groups' configs and client-metrics
    subscriptions (kafka-configs.sh)."""
    if action is None:
        fail("Command must include exactly one action: --describe, --alter")
    if action == "describe" and (add_config or add_config_file or delete_configs):
        given = "add-config" if add_config or add_config_file else "delete-config"
        fail(f"Option \"[describe]\" can't be used with option \"[{given}]\"")
    entities = _entities(entity_options, click.get_current_context().meta.get(_NAME_ORDER, []))
    groups = GROUPS in entities.types
    client_metrics = CLIENT_METRICS in entities.types
    if groups:
        check_group_entities(entities.types, entities.names, alter=action == "alter")
    elif client_metrics:
        check_client_metrics_entities(entities.types, entities.names, alter=action == "alter")
    else:
        check_entities(entities, alter=action == "alter")
    if action == "alter":
        _check_alter_options(entities, add_config, add_config_file, delete_configs)
    added, deleted = _configs_to_add(add_config, add_config_file), _configs_to_delete(delete_configs)
    security = command_config_security(command_config)
    try:
        client = KafkaClient(bootstrap_server, client_id="pafka-configs", timeout=timeout_ms / 1000 + 5,
                             security=security)
        if groups:
            _groups(client, timeout_ms, action, entities, describe_all, (added, deleted))
        elif client_metrics:
            _client_metrics(client, timeout_ms, action, entities, (added, deleted))
        elif action == "describe":
            _describe(client, timeout_ms, entities)
        else:
            _alter(client, timeout_ms, entities, added, deleted)
    except KafkaClientError as exc:
        fail(f"Error while executing config command with args '{entities.args_text()}': {exc}")
    sys.stdout.flush()
