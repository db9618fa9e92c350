"""Test helper: no hanging transaction on a broker (``pafka transactions find-hanging`` with no age limit).

A transaction is hanging when a partition holds it open but its coordinator
no longer has it in progress on that partition: nothing will write its
marker, and the partition's last stable offset is stuck behind it. Call
:func:`assert_no_hanging_transactions` after a transaction test.
"""

from __future__ import annotations

from client import KafkaClient
from client.transactions import OpenTransaction, TransactionAdmin
from pytest_pafka.waiting import wait_until

#: A transaction seen open on a partition while it was ending may look hanging for one look: look again.
RECHECK_INTERVAL_S = 0.2


def hanging_transactions(bootstrap: str, topics: list[str] | None = None) -> list[OpenTransaction]:
    """Every hanging transaction now, in ``topics`` (default: every topic, internal ones included)."""
    with KafkaClient(bootstrap, client_id="pafka-tests-find-hanging", timeout=30.0) as client:
        admin = TransactionAdmin(client, timeout=30.0)
        if topics is None:
            partitions = admin.partitions_to_search(include_internal=True)
        else:
            partitions = [tp for topic in topics for tp in admin.partitions_to_search(topic)]
        return admin.find_hanging(partitions, max_transaction_timeout_ms=0)


def assert_no_hanging_transactions(bootstrap: str, topics: list[str] | None = None, *,
                                   timeout_s: float = 10.0) -> None:
    """Pass once a look finds no hanging transaction; fail if every look for ``timeout_s`` finds one."""
    wait_until(lambda: hanging_transactions(bootstrap, topics), timeout_s, "hanging transactions",
               interval=RECHECK_INTERVAL_S, until=lambda hanging: not hanging)
