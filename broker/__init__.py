"""pafka broker: wires protocol, storage and coordinators to asyncio, config and the CLI."""
