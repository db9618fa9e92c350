"""The ``pafka`` command line."""

from __future__ import annotations

import click

from storage.dump_log import dump_log_command


@click.group()
@click.version_option(package_name="pafka")
def main() -> None:
    """pafka: a Kafka-compatible broker in pure Python."""


main.add_command(dump_log_command)

if __name__ == "__main__":
    main()
