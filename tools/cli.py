"""The ``pafka`` command line."""

from __future__ import annotations

import click

from broker.broker_command import broker_command
from tools.dump_log import dump_log_command


@click.group()
@click.version_option(package_name="pafka")
def main() -> None:
    """pafka: a Kafka-compatible broker in pure Python."""


main.add_command(broker_command)
main.add_command(dump_log_command)

# pafka's client tools (issue 4).
from tools.console_consumer import console_consumer_command  # noqa: E402
from tools.console_producer import console_producer_command  # noqa: E402
from tools.topics_command import topics_command  # noqa: E402

main.add_command(topics_command)
main.add_command(console_producer_command)
main.add_command(console_consumer_command)

from tools.consumer_groups_command import consumer_groups_command  # noqa: E402  (issue 5)

main.add_command(consumer_groups_command)

from tools.transactions_command import transactions_command  # noqa: E402  (issue 16)

main.add_command(transactions_command)

from tools.dev_cluster import dev_cluster_command  # noqa: E402  (issue 17)

main.add_command(dev_cluster_command)

if __name__ == "__main__":
    main()

from tools.reassign_partitions_command import reassign_partitions_command  # noqa: E402  (issue 18)

main.add_command(reassign_partitions_command)

from tools.configs_command import configs_command  # noqa: E402  (issue 19)

main.add_command(configs_command)

from tools.acls_command import acls_command  # noqa: E402  (issue 19)

main.add_command(acls_command)
