"""ZkProducerIdManager: producer ids unique across the cluster, in blocks claimed in ZooKeeper.

Kafka's ZooKeeper-mode ProducerIdManager: a broker claims 1,000 ids at a time by a
conditional write of /latest_producer_id_block (controller/zk/kafka_zk_client.py), so
two brokers never hand out the same id, across restarts and controller changes; a
crash only wastes the rest of a block. Callers that find the block used up while a
claim is in flight wait for that claim instead of making their own.
"""

from __future__ import annotations

import asyncio
import logging

from controller.zk.kafka_zk_client import KafkaZkClient
from controller.zk.zk_data import PRODUCER_ID_BLOCK_SIZE

log = logging.getLogger(__name__)


class ZkProducerIdManager:
    def __init__(self, broker_id: int, zk: KafkaZkClient, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.block_size = block_size
        self._claim_lock = asyncio.Lock()
        self._next = 0
        self._block_end = -1  # inclusive; -1: no block claimed yet
        #: Blocks claimed so far (for logs and tests).
        self.blocks_claimed = 0

    async def generate_producer_id(self) -> int:
        """A producer id no broker of the cluster has handed out (a ZooKeeper write when a block runs out)."""
        if self._next > self._block_end:
            async with self._claim_lock:
                # Another caller may have claimed a block while this one waited for the lock.
                while self._next > self._block_end:
                    first, last = await self.zk.claim_producer_id_block(self.broker_id, self.block_size)
                    self._next, self._block_end = first, last
                    self.blocks_claimed += 1
                    log.info("broker %d: producer ids %d-%d claimed", self.broker_id, first, last)
        producer_id = self._next
        self._next += 1
        return producer_id
