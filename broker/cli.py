"""The ``pafka`` command line."""

from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="pafka")
def main() -> None:
    """pafka: a Kafka-compatible broker in pure Python."""


if __name__ == "__main__":
    main()
