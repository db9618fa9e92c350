"""A watch across a lost connection (the session survives): a change made meanwhile is delivered even when
it ends where it began, such as a broker whose session expired and that registered again under the same id
while the controller's own connection was down. Kafka's controller hears of it through ZooKeeper's
SetWatches on reconnection and handles the broker as bounced."""

from __future__ import annotations

import asyncio

from kazoo.client import KazooClient

from controller.zk.zk_session import ZooKeeperSession
from pytest_pafka.tcp_proxy import Direction, Mode, TcpProxy
from pytest_pafka.waiting import wait_until_async


def test_children_deleted_and_created_again_while_disconnected_are_delivered(zk_connect: str) -> None:
    server, _, chroot = zk_connect.partition("/")
    host, port = server.split(":")

    async def scenario() -> None:
        with TcpProxy((host, int(port))) as proxy:
            writer = KazooClient(hosts=server)
            await asyncio.to_thread(writer.start, 10)
            await asyncio.to_thread(writer.create, f"/{chroot}/ids/1", b"epoch 1", ephemeral=True,
                                    makepath=True)
            watcher = ZooKeeperSession(f"{proxy.host}:{proxy.port}/{chroot}", 10_000, 10_000)
            await watcher.start()
            seen: list[list[str]] = []
            await watcher.watch_children("/ids", seen.append)
            try:
                await wait_until_async(lambda: seen == [["1"]], 10, "the first delivery")
                proxy.set(Direction.UPSTREAM, Mode.CLOSE)  # every reconnection attempt is closed at once
                proxy.drop()
                await wait_until_async(lambda: watcher.state != "CONNECTED", 10, "the watcher disconnected")
                await asyncio.to_thread(writer.delete, f"/{chroot}/ids/1")
                await asyncio.to_thread(writer.create, f"/{chroot}/ids/1", b"epoch 2", ephemeral=True)
                proxy.set(Direction.UPSTREAM, Mode.PASS)
                await wait_until_async(lambda: len(seen) == 2, 10, "the change delivered after the reconnection")
                assert seen == [["1"], ["1"]]
            finally:
                await watcher.close()
                await asyncio.to_thread(writer.stop)
                writer.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
