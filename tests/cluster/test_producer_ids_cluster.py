"""Producer ids unique cluster-wide (issue 17): 10,000 InitProducerId requests over the wire, spread
over three brokers concurrently, with the controller SIGKILLed (and restarted) in the middle: every
id handed out is distinct, and /latest_producer_id_block holds Kafka's JSON for blocks of 1,000."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from client.connection import BrokerConnection
from client.errors import KafkaConnectionError
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from pytest_pafka.cluster import Cluster

TOTAL = 10_000
WORKERS_PER_BROKER = 2
DEADLINE_S = 180.0
#: What a broker may answer while it claims a block or its coordinator moves: try again.
RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
             ErrorCode.REQUEST_TIMED_OUT}


@dataclass
class Collected:
    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: list[tuple[int, int, int]] = field(default_factory=list)  # (producer id, epoch, broker id)
    retriable: dict[int, int] = field(default_factory=dict)
    fatal: list[str] = field(default_factory=list)
    halfway: threading.Event = field(default_factory=threading.Event)

    def done(self) -> bool:
        with self.lock:
            return len(self.ids) >= TOTAL or bool(self.fatal)


def worker(cluster: Cluster, first_broker: int, collected: Collected, deadline: float) -> None:
    """Requests ids until there are enough; anything unexpected is a fatal finding, never a silent thread death."""
    try:
        request_ids(cluster, first_broker, collected, deadline)
    except Exception as exc:
        with collected.lock:
            collected.fatal.append(f"worker for broker {first_broker}: {exc!r}")


def request_ids(cluster: Cluster, first_broker: int, collected: Collected, deadline: float) -> None:
    order = itertools.cycle(sorted(cluster.broker_ids, key=lambda b: (b != first_broker, b)))
    broker_id = next(order)
    conn: BrokerConnection | None = None
    while not collected.done() and time.monotonic() < deadline:
        try:
            if conn is None:
                broker = cluster.broker(broker_id)
                conn = BrokerConnection(broker.host, broker.port, timeout=10.0).connect()
            response = conn.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000))
            assert isinstance(response, InitProducerIdResponse)
        except (KafkaConnectionError, OSError):
            # That broker is down (the killed controller): carry on through the next one.
            if conn is not None:
                conn.close()
            conn = None
            broker_id = next(order)
            time.sleep(0.05)
            continue
        code = ErrorCode(response.error_code)
        with collected.lock:
            if code == ErrorCode.NO_ERROR:
                collected.ids.append((response.producer_id, response.producer_epoch, broker_id))
                if len(collected.ids) >= TOTAL // 2:
                    collected.halfway.set()
            elif code in RETRIABLE:
                collected.retriable[code] = collected.retriable.get(code, 0) + 1
            else:
                collected.fatal.append(f"broker {broker_id}: {code.name}")
        if code in RETRIABLE:
            time.sleep(0.02)
    if conn is not None:
        conn.close()


def test_producer_ids_distinct_across_brokers_and_a_controller_change(cluster: Cluster) -> None:
    collected = Collected()
    deadline = time.monotonic() + DEADLINE_S
    threads = [threading.Thread(target=worker, args=(cluster, b, collected, deadline), daemon=True)
               for b in cluster.broker_ids for _ in range(WORKERS_PER_BROKER)]
    old = cluster.controller_id()
    assert old is not None
    for thread in threads:
        thread.start()
    try:
        assert collected.halfway.wait(DEADLINE_S / 2) and not collected.fatal, \
            f"not halfway: {len(collected.ids)} ids, {collected.fatal[:5]}"
        cluster.kill(old)
        new = cluster.wait_for(lambda: (c := cluster.controller_id()) is not None and c != old and c, 15.0,
                                "a new controller")
        assert new != old
        cluster.start(old)  # the restarted broker hands out ids again, from a block of its own
    finally:
        for thread in threads:
            thread.join(DEADLINE_S)
        if not cluster.broker(old).running:
            cluster.start(old)
    assert not any(t.is_alive() for t in threads)
    assert not collected.fatal, collected.fatal[:5]
    assert len(collected.ids) >= TOTAL, f"only {len(collected.ids)} ids before the deadline"

    ids = [pid for pid, _, _ in collected.ids]
    assert len(set(ids)) == len(ids), f"{len(ids) - len(set(ids))} producer ids handed out twice"
    assert all(pid >= 0 for pid in ids)
    assert {epoch for _, epoch, _ in collected.ids} == {0}
    by_broker = {b: [pid for pid, _, origin in collected.ids if origin == b] for b in cluster.broker_ids}
    assert all(by_broker[b] for b in cluster.broker_ids), {b: len(v) for b, v in by_broker.items()}
    # Each broker hands out ids from blocks of 1,000 of its own: no block is shared by two brokers.
    blocks = {b: {pid // 1000 for pid in pids} for b, pids in by_broker.items()}
    for a, b in itertools.combinations(cluster.broker_ids, 2):
        assert not blocks[a] & blocks[b], f"brokers {a} and {b} share blocks {sorted(blocks[a] & blocks[b])[:5]}"

    block = cluster.read_json("/latest_producer_id_block")
    assert block["version"] == 1
    assert block["broker"] in cluster.broker_ids
    assert isinstance(block["block_start"], str) and isinstance(block["block_end"], str), "Kafka writes longs as text"
    start, end = int(block["block_start"]), int(block["block_end"])
    assert end - start + 1 == 1000 and start % 1000 == 0
    assert end >= max(ids)
