"""``pafka features``: kafka-features.sh's ``describe`` on pafka's client.

    --bootstrap-server HOST:PORT [--command-config FILE] describe

One line per supported feature, sorted by name, as Kafka's FeatureCommand
prints it: the supported range, the finalized level (0 when the feature is not
finalized) and the finalized-features epoch (``-`` when unknown). pafka's
levels follow the broker's configuration and it serves no UpdateFeatures, so
kafka-features.sh's upgrade, downgrade and disable have no counterpart here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from client import KafkaClient, KafkaClientError
from client.admin import AdminClient
from client.features import FeatureMetadata
from tools.common import command_config_security, fail


def describe_lines(features: FeatureMetadata) -> list[str]:
    epoch = "-" if features.finalized_features_epoch is None else str(features.finalized_features_epoch)
    lines = []
    for name in sorted(features.supported_features):
        low, high = features.supported_features[name]
        finalized = features.finalized_features.get(name, (0, 0))[1]
        lines.append(f"Feature: {name}\tSupportedMinVersion: {low}\tSupportedMaxVersion: {high}\t"
                     f"FinalizedVersionLevel: {finalized}\tEpoch: {epoch}")
    return lines


@click.group("features")
@click.option("--bootstrap-server", required=True, metavar="host:port",
              help="A comma-separated list of host:port pairs to use for establishing the connection to the "
                   "Kafka cluster.")
@click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Property file containing configs to be passed to Admin Client.")
@click.pass_context
def features_command(ctx: click.Context, bootstrap_server: str, command_config: Path | None) -> None:
    """Describe the cluster's feature flags (kafka-features.sh)."""
    ctx.obj = (bootstrap_server, command_config)


@features_command.command("describe")
@click.pass_context
def describe_command(ctx: click.Context) -> None:
    """Describe existing features."""
    bootstrap_server, command_config = ctx.obj
    security = command_config_security(command_config)
    try:
        with KafkaClient(bootstrap_server, client_id="pafka-features", security=security) as client:
            features = AdminClient(client).describe_features()
    except KafkaClientError as exc:
        fail(f"describe: {exc}")
    for line in describe_lines(features):
        click.echo(line)
    sys.stdout.flush()
