"""Kafka's segmented log on disk: synchronous file I/O, no sockets, no asyncio."""
