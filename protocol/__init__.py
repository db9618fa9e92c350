"""Sans-IO Kafka wire protocol: bytes in, objects out.

No sockets, files or asyncio here. Message codecs are generated from Kafka's
JSON message schemas (see ``protocol.codegen``); record batches are hand-written.
"""
