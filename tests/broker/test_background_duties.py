"""Checkpoint duties run on the scheduler thread, so appends never queue behind their fsyncs."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import broker.kafka_server as kafka_server_module
from broker.config.broker_config import load_broker_config
from broker.kafka_server import KafkaServer
from pytest_pafka.ports import free_port


def test_high_watermark_checkpoint_leaves_the_append_thread_free(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_server_module, "HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS", 10)
    config = load_broker_config(overrides=[f"log.dirs={tmp_path / 'data'}",
                                           f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                                           "prometheus.metrics.port=0"],
                                environ={})

    async def scenario() -> tuple[str, bool]:
        server = KafkaServer(config)
        started, release = threading.Event(), threading.Event()
        seen: dict[str, str] = {}
        real_checkpoint = server.log_manager.checkpoint_high_watermarks

        def slow_checkpoint() -> None:
            seen["thread"] = threading.current_thread().name
            started.set()
            release.wait(5)  # a checkpoint stuck in fsync
            real_checkpoint()

        server.log_manager.checkpoint_high_watermarks = slow_checkpoint  # type: ignore[method-assign]
        await server.startup()
        try:
            assert await asyncio.to_thread(started.wait, 5), "no high watermark checkpoint ran"
            # While the checkpoint is stuck, the append thread still takes work at once.
            idle = server.append_thread.idle
            ran = await asyncio.wait_for(server.append_thread.run(threading.current_thread), 2)
            release.set()
            return seen["thread"], idle and ran.name.startswith("pafka-append")
        finally:
            release.set()
            await server.shutdown()

    thread_name, append_free = asyncio.run(scenario())
    assert thread_name.startswith("pafka-scheduler")
    assert append_free
