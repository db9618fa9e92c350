"""/readyz answers 503 while the broker recovers its logs and 200 once it serves; /livez answers throughout."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from broker.config.broker_config import load_broker_config
from broker.kafka_server import KafkaServer
from pytest_pafka.ports import free_port
from tests.metrics.scrape import get


def test_ready_only_once_started(tmp_path: Path) -> None:
    config = load_broker_config(overrides=[f"log.dirs={tmp_path / 'data'}",
                                           f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                                           "prometheus.metrics.port=0"], environ={})

    async def scenario() -> list[tuple[int, str]]:
        server = KafkaServer(config)
        recovering, release = threading.Event(), threading.Event()
        real_startup = server.log_manager.startup

        def slow_recovery() -> None:
            recovering.set()
            release.wait(10)  # a long log recovery
            real_startup()

        server.log_manager.startup = slow_recovery  # type: ignore[method-assign]
        starting = asyncio.create_task(server.startup())
        assert await asyncio.to_thread(recovering.wait, 10)
        endpoint = server.metrics_endpoint
        assert endpoint is not None
        base = f"http://127.0.0.1:{endpoint.port}"
        answers = [await asyncio.to_thread(get, base + "/readyz"), await asyncio.to_thread(get, base + "/livez")]
        release.set()
        await starting
        answers.append(await asyncio.to_thread(get, base + "/readyz"))
        await server.shutdown()
        return answers

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == [(503, "not ready\n"), (200, "ok\n"), (200, "ready\n")]
