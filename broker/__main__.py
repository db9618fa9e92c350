"""``python -m broker``: run one broker (``pafka broker`` without importing the CLI's tools)."""

from broker.broker_command import broker_command

broker_command()
