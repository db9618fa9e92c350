"""ZooKeeper: Kafka 3.9's znode layout and JSON (zk_data) and the asyncio client over kazoo (kafka_zk_client)."""
