"""Sans-IO Kafka wire protocol: bytes in, objects out.

No sockets, files or asyncio here. Message codecs are generated from Kafka's
JSON message schemas (see ``protocol.codegen``); record batches are hand-written.
The values Kafka gives integer fields a name for are defined once, here:
``protocol.config_types`` (the config APIs' enums) and ``protocol.request_constants``
(isolation levels, ListOffsets' special timestamps, coordinator types).
"""
