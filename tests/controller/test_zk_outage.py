"""KafkaZkClient while ZooKeeper itself is down: calls wait and go through when it is back;
a process exiting meanwhile is not held up by the waiting ZooKeeper thread.

Each test runs its own ZooKeeper (it is stopped on purpose), not the session's.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

from controller.zk import zk_data as zd
from controller.zk.kafka_zk_client import KafkaZkClient
from pytest_pafka.zookeeper import ZooKeeperProcess

ROOT = Path(__file__).resolve().parents[2]


def test_a_call_waits_for_zookeeper_to_come_back() -> None:
    with ZooKeeperProcess() as zookeeper:
        async def scenario() -> None:
            client = KafkaZkClient(zookeeper.chroot("outage"), 20_000, 10_000)
            await client.start()
            try:
                await asyncio.to_thread(zookeeper.stop_server)
                create = asyncio.ensure_future(client.create_topic("t", zd.TopicAssignment(uuid.uuid4(), {0: [1]}), {}))
                await asyncio.sleep(1.0)
                assert not create.done()  # waiting for the connection, not failed
                await asyncio.to_thread(zookeeper.start_server)
                # Bounded above the session timeout: a reconnection that reaches the server while it
                # is still starting waits out kazoo's handshake read (session timeout / hosts, 20 s)
                # before it tries again, as happened under CI load.
                await asyncio.wait_for(create, 60)
                assert await client.get_all_topics() == {"t"}
            finally:
                await client.close()
        asyncio.run(asyncio.wait_for(scenario(), 150))


CHILD = r"""
import asyncio, sys
from controller.zk.kafka_zk_client import KafkaZkClient

async def main() -> None:
    client = KafkaZkClient(sys.argv[1], 20000, 10000)
    await client.start()
    print("started", flush=True)
    sys.stdin.readline()  # ZooKeeper is down now
    call = asyncio.ensure_future(client.get_all_topics())
    await asyncio.sleep(0.5)
    print("waiting" if not call.done() else "done", flush=True)
    # returns without close(): the ZooKeeper thread is still waiting for a connection

asyncio.run(main())
"""


def test_the_process_exits_while_a_call_waits_for_zookeeper() -> None:
    with ZooKeeperProcess() as zookeeper:
        child = subprocess.Popen([sys.executable, "-c", CHILD, zookeeper.connect_string], cwd=ROOT,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdin is not None and child.stdout is not None
            assert child.stdout.readline().strip() == "started"
            zookeeper.stop_server()
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "waiting"
            started = time.monotonic()
            child.wait(timeout=15)
            assert time.monotonic() - started < 5
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
