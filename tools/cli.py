"""The ``pafka`` command line: ``pafka <command>``, or ``python -m tools <command>``."""

from __future__ import annotations

import click

from broker.broker_command import broker_command
from tools.acls_command import acls_command
from tools.client_metrics_command import client_metrics_command
from tools.configs_command import configs_command
from tools.console_command import console_command
from tools.console_consumer import console_consumer_command
from tools.console_producer import console_producer_command
from tools.consumer_groups_command import consumer_groups_command
from tools.dev_cluster import dev_cluster_command
from tools.dump_log import dump_log_command
from tools.features_command import features_command
from tools.log_dirs_command import log_dirs_command
from tools.reassign_partitions_command import reassign_partitions_command
from tools.share_groups_command import share_groups_command
from tools.topics_command import topics_command
from tools.transactions_command import transactions_command


@click.group()
@click.version_option(package_name="pafka")
def main() -> None:
    """pafka: a Kafka-compatible broker in pure Python."""


#: Every command, by what it works on (``--help`` lists them alphabetically).
COMMANDS: tuple[click.Command, ...] = (
    # the broker
    broker_command,
    # topics, their records and configs
    topics_command,
    console_producer_command,
    console_consumer_command,
    configs_command,
    client_metrics_command,
    # consumer groups and their offsets
    consumer_groups_command,
    share_groups_command,
    # transactions
    transactions_command,
    # security
    acls_command,
    # operations and development
    reassign_partitions_command,
    log_dirs_command,
    features_command,
    dump_log_command,
    dev_cluster_command,
    console_command,
)

for _command in COMMANDS:
    main.add_command(_command)

if __name__ == "__main__":
    main()
