"""SIGTERM with clients attached: prompt, clean, and recognised as clean on restart.

A consumer is parked in a 30-second long poll and a producer is writing when
the broker gets SIGTERM. It must answer what is in flight, exit 0 within a few
seconds (not wait out the poll), write its clean-shutdown marker, and start
again without recovering any log.
"""

from __future__ import annotations

import threading
import time

from pytest_pafka.broker_process import BrokerProcess
from tests.integration.clients import ConfluentDriver

SHUTDOWN_LIMIT_S = 3.0  # below the 5 s drain bound, which a parked fetch must not use up


def test_sigterm_during_long_polls_and_produce_is_prompt_and_clean() -> None:
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    with BrokerProcess() as broker:
        ConfluentDriver().create_topic(broker.bootstrap, "quiet", 1)
        ConfluentDriver().create_topic(broker.bootstrap, "busy", 1)
        tp = TopicPartition("quiet", 0)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, fetch_max_wait_ms=30000,
                                 request_timeout_ms=40000)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                try:
                    consumer.poll(timeout_ms=500)
                except Exception:  # the broker is going away; reconnect errors are expected
                    time.sleep(0.1)

        poller = threading.Thread(target=poll, name="long-poller")
        poller.start()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
        acked: list[int] = []
        try:
            for i in range(2000):
                producer.produce("busy", value=b"%d" % i, on_delivery=lambda e, m: e is None and acked.append(1))
                producer.poll(0)
            producer.flush(10)
            time.sleep(1.0)  # the consumer's fetch is parked at the broker now
            started = time.monotonic()
            code = broker.terminate()
            took = time.monotonic() - started
        finally:
            stop.set()
            poller.join(timeout=10)
            consumer.close()
        assert code == 0, broker.log_text()[-3000:]
        assert took < SHUTDOWN_LIMIT_S, f"shutdown took {took:.1f}s:\n{broker.log_text()[-3000:]}"
        assert len(acked) == 2000
        assert "shut down cleanly" in broker.log_text()
        broker.start()
        restart_log = broker.log_text().split("shut down cleanly")[-1]
        assert "no clean shutdown marker" not in restart_log
        assert "recover" not in restart_log.lower(), restart_log
        assert ConfluentDriver().consume(broker.bootstrap, "busy", 1, expected=None).__len__() == 2000
