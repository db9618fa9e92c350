"""Write the seed corpus (``fuzz/corpus/<target>/``): what real clients send, built with pafka's codecs.

Every request API at every version (the generated encoders, as a client frames them), record
batches of every codec and message sets v0/v1 of every codec (as producers write them), the
SASL messages librdkafka and the Java client send, the znodes Kafka writes, and a broker's
``server.properties``. Run ``python -m fuzz.make_corpus`` after the schemas change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from protocol import compression
from protocol.api import APIS, encode_request
from protocol.buffers import join_chunks
from protocol.legacy_record import build_message_set
from protocol.records import Record, build_batch

CORPUS = Path(__file__).parent / "corpus"
CODECS = (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD)


def requests() -> Iterator[bytes]:
    for api_key, spec in APIS.items():
        for version in spec.versions:
            yield join_chunks(encode_request(api_key, version, 7, "rdkafka", spec.request()))


def _records() -> list[Record]:
    return [Record(i, 1_700_000_000_000 + i, f"key-{i}".encode() if i % 2 else None, b"value" * (i + 1),
                   [("h", b"v")] if i == 1 else []) for i in range(3)]


def batches() -> Iterator[bytes]:
    for codec in CODECS:
        yield bytes(build_batch(_records(), compression=codec))
        yield bytes(build_batch(_records(), compression=codec, producer_id=5, producer_epoch=0, base_sequence=0,
                                is_transactional=True))


def message_sets() -> Iterator[bytes]:
    for magic in (0, 1):
        for codec in CODECS[:4]:  # zstd needs message format v2
            yield bytes(build_message_set(_records(), magic, codec, 0))


SASL_PLAIN = [b"\x00alice\x00alice-secret", b"alice\x00alice\x00wrong", b"\x00\x00"]
SASL_SCRAM = [
    (b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL\x00c=biws,r=fyko+d2lbbFgONRv9qkxdawLserver,"
    b"p=dHpbxt8r2kcy+dnp4yw3+cP6hFsAeTNpzJK6OZjn2M8="),
    b"n,,n=alice,r=abc\x00c=biws,r=*,p=dHpbxt8r2kcy+dnp4yw3+cP6hFsAeTNpzJK6OZjn2M8=",
    b"n,a=alice,n=alice,r=abc,tokenauth=true\x00",
]
#: The first byte picks the reader (fuzz.targets._ZK_READERS' order).
ZNODES = [
    b'\x00{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}',
    b"\x013",
    (b'\x02{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://127.0.0.1:9092"],"jmx_port":-1,"port":9092,"host":"127.0.0.1",'
    b'"version":5,"timestamp":"1700000000000","rack":"r1"}'),
    (b'\x03{"partitions":{"0":[1,2,3],"1":[2,3,1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","adding_replicas":{},'
    b'"removing_replicas":{},"version":3}'),
    b'\x04{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}',
    b'\x05{"version":1,"config":{"retention.ms":"1000"}}',
    b'\x06{"version":2,"entity_path":"topics/t"}',
    b'\x07{"version":1,"partitions":[{"topic":"t","partition":0}]}',
    b'\x08{"version":1,"broker":1,"event":1}',
    b'\x09{"version":1,"partitions":[{"topic":"t","partition":0}]}',
    b'\x0a{"version":"1","id":"abcdefghijklmnopqrstuv"}',
    b'\x0b{"version":1,"broker":1,"block_start":"0","block_end":"999"}',
]
PROPERTIES = [
    (b"broker.id=1\nlisteners=PLAINTEXT://:9092\nlog.dirs=/tmp/a,/tmp/b\nnum.partitions=3\n"
    b"queued.max.request.bytes=104857600\n# comment\nzookeeper.connect=localhost:2181\\\n/kafka\n"),
    (b"listener.security.protocol.map=A:SASL_SSL,B:PLAINTEXT\nsasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
    b"log.retention.hours : 1\n! another comment\nmax.connections.per.ip.overrides=127.0.0.1:5\n"),
]


def seeds() -> dict[str, list[bytes]]:
    return {
        "request_decoders": list(requests()),
        "record_batches": list(batches()),
        "legacy_messages": list(message_sets()),
        "sasl_plain": SASL_PLAIN,
        "sasl_scram": SASL_SCRAM,
        "zookeeper_json": ZNODES,
        "server_properties": PROPERTIES,
    }


def write(root: Path = CORPUS) -> int:
    written = 0
    for target, inputs in seeds().items():
        directory = root / target
        directory.mkdir(parents=True, exist_ok=True)
        for data in inputs:
            (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)
            written += 1
    return written


if __name__ == "__main__":
    print(f"{write()} seeds in {CORPUS}")
