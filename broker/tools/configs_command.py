"""``pafka configs``: kafka-configs.sh for users' SCRAM credentials.

    pafka configs --bootstrap-server H:P --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    pafka configs --bootstrap-server H:P --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512
    pafka configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice]

``--command-config FILE`` holds the client's properties (``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config``, ``ssl.*``), as Kafka's tools take them. The password is turned into a salted
password here (``client.admin``): it never reaches the broker. Topic and broker configs are the
``topics`` command's and the admin API's; user quotas are not served yet, and asking for them
says so instead of pretending.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from broker.config.broker_config import parse_properties as parse_properties_file
from broker.tools.common import fail
from client.admin import AdminClient
from client.client import KafkaClient
from client.client_security import ClientSecurity
from client.errors import KafkaClientError
from client.scram import DEFAULT_ITERATIONS, ScramMechanism

#: Kafka's ConfigCommand splits --add-config on commas outside square brackets.
_TOP_LEVEL_COMMA = re.compile(r",(?=[^\]]*(?:\[|$))")


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
        raise click.BadParameter(f"Unknown SCRAM mechanism or user quota config {mechanism_name}: user quotas are "
                                 f"not served by pafka yet", param_hint="--add-config")
    fields = dict(part.split("=", 1) for part in value.strip("[]").split(",") if "=" in part)
    if "password" not in fields:
        raise click.BadParameter(f"{mechanism_name} needs password=<password>", param_hint="--add-config")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise click.BadParameter(f"{mechanism_name}: iterations must be a number", param_hint="--add-config") from None
    return user, mechanism, fields["password"], iterations


def _describe(admin: AdminClient, user: str | None) -> None:
    try:
        described = admin.describe_user_scram_credentials(None if user is None else [user])
    except KafkaClientError as exc:
        if "does not exist" not in str(exc):
            raise
        described = {}  # a user without credentials: nothing to print, as kafka-configs.sh
    for name, infos in sorted(described.items()):
        text = ", ".join(f"{mechanism.mechanism_name}=iterations={iterations}" for mechanism, iterations in infos)
        click.echo(f"SCRAM credential configs for user-principal '{name}' are {text}")


def _alter(admin: AdminClient, user: str, add_config: str | None, delete_configs: tuple[str, ...]) -> None:
    added = parse_configs_to_add(add_config) if add_config else {}
    upsertions = [scram_upsertion(user, name, value) for name, value in added.items()]
    deletions = []
    for name in (n for item in delete_configs for n in item.split(",") if n.strip()):
        mechanism = ScramMechanism.for_name(name.strip())
        if mechanism is None:
            raise click.BadParameter(f"{name.strip()} is no SCRAM mechanism (user quotas are not served yet)",
                                     param_hint="--delete-config")
        deletions.append((user, mechanism))
    if not upsertions and not deletions:
        fail("--alter needs --add-config or --delete-config")
    admin.alter_user_scram_credentials(upsertions, deletions)
    click.echo(f"Completed updating config for user {user}.")


@click.command("configs")
@click.option("--bootstrap-server", required=True, help="HOST:PORT[,HOST:PORT...] of the brokers to connect to.")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*.")
@click.option("--alter", "action", flag_value="alter", help="Alter the configs of an entity.")
@click.option("--describe", "action", flag_value="describe", help="List the configs of an entity or all.")
@click.option("--entity-type", type=click.Choice(["users"]), required=True, help="users (SCRAM credentials).")
@click.option("--entity-name", help="The user name.")
@click.option("--add-config", help="'SCRAM-SHA-256=[iterations=8192,password=secret],SCRAM-SHA-512=[password=secret]'.")
@click.option("--delete-config", "delete_configs", multiple=True, help="A mechanism whose credential to delete.")
@click.option("--timeout-ms", type=int, default=30_000, show_default=True, help="Request timeout.")
def configs_command(bootstrap_server: str, command_config: Path | None, action: str | None, entity_type: str,
                    entity_name: str | None, add_config: str | None, delete_configs: tuple[str, ...],
                    timeout_ms: int) -> None:
    """Describe and alter users' SCRAM credentials (kafka-configs.sh)."""
    if action is None:
        fail("Command must include exactly one action: --describe, --alter")
    if action == "alter" and not entity_name:
        fail("an entity name must be specified with --alter of users")
    try:
        props = parse_properties_file(command_config.read_text()) if command_config is not None else {}
        security = ClientSecurity.from_properties(props)
    except (OSError, ValueError) as exc:
        fail(f"Invalid --command-config: {exc}")
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-configs", timeout=timeout_ms / 1000 + 5,
                         security=security) as client:
            admin = AdminClient(client, timeout_ms=timeout_ms)
            if action == "describe":
                _describe(admin, entity_name)
            else:
                _alter(admin, entity_name, add_config, delete_configs)  # type: ignore[arg-type]
    except KafkaClientError as exc:
        fail(f"Error while executing config command with args '--entity-type {entity_type}': {exc}")
    sys.stdout.flush()
