"""The "consumer" protocol type's embedded formats (Kafka's ConsumerProtocol), read-only.

Wire formats carried inside JoinGroup/SyncGroup, shared by the group
coordinator and pafka's client. The coordinator never interprets a group's protocol metadata to run the
protocol (assignment happens in the clients), but Kafka reads two things from
groups of protocol type ``consumer``: the topics members subscribe to (offset
expiry and OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC), and the assignment
(``kafka-consumer-groups --describe``). Both formats (ConsumerProtocolSubscription
and ConsumerProtocolAssignment) are non-flexible and start with an int16
version; their leading fields are the same in every version, which is all we
read.
"""

from __future__ import annotations

import struct

from protocol.readable import Readable

CONSUMER_PROTOCOL_TYPE = "consumer"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    pass


def _reader(data: bytes) -> Readable:
    return Readable(data, ConsumerProtocolError, "consumer protocol data")


def subscribed_topics(subscription: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription (any version)."""
    r = _reader(subscription)
    r.int16()
    return {r.string() for _ in range(r.array_length())}


def assigned_partitions(assignment: bytes) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a ConsumerProtocolAssignment; empty bytes → none."""
    if not assignment:
        return []
    r = _reader(assignment)
    r.int16()
    out: list[tuple[str, int]] = []
    for _ in range(r.array_length()):
        topic = r.string()
        out.extend((topic, r.int32()) for _ in range(r.array_length()))
    return out


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    """A minimal ConsumerProtocolSubscription v0 (tests and tools)."""
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(topics))
    for topic in topics:
        data = topic.encode()
        out += _I16.pack(len(data)) + data
    out += _I32.pack(-1)  # user data: null
    return bytes(out)


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(partitions))
    for topic, indexes in partitions.items():
        data = topic.encode()
        out += _I16.pack(len(data)) + data
        out += _I32.pack(len(indexes))
        for index in indexes:
            out += _I32.pack(index)
    out += _I32.pack(-1)
    return bytes(out)
