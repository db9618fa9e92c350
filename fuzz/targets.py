"""One fuzz target per family of parsers: each takes arbitrary bytes and must either succeed or
raise the error its caller turns into Kafka's answer (a closed connection, an error code, a
refused znode or config). Anything else propagates: the fuzzer reports it as a crash.

A target also fails when what it decoded claims more memory than its input could describe
(``check_allocation``): a length field must never make the broker allocate past its frame.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from pydantic import ValidationError

from broker.config.broker_config import BrokerConfig, parse_properties
from broker.security.sasl_server import PlainSaslServer, SaslError, ScramSaslServer
from client.scram import ScramCredential, ScramMechanism
from controller.zk import zk_data
from protocol.api import decode_request
from protocol.errors import ProtocolError
from protocol.legacy_record import iter_legacy_records, up_convert
from protocol.record_batch import iter_batch_headers
from protocol.records import read_batch

#: Decompressed records may grow past their frame, up to the codecs' own limit.
DECOMPRESSED_LIMIT = 1 << 20


def request_decoders(data: bytes) -> None:
    """Every API and version through the generated codecs, as the socket server decodes a frame."""
    try:
        decode_request(bytearray(data))
    except ProtocolError:
        pass  # the connection is closed (or ApiVersions answered), as Kafka does


def record_batches(data: bytes) -> None:
    """RecordBatch v2 (every compression codec): headers, CRC, decompression and records."""
    try:
        for pos, _header in itertools.islice(iter_batch_headers(data), 16):
            _, records = read_batch(data, pos, verify_crc=False, max_decompressed_size=DECOMPRESSED_LIMIT)
            check_allocation(len(records), DECOMPRESSED_LIMIT + len(data))
    except ProtocolError:
        pass  # CORRUPT_MESSAGE


def legacy_messages(data: bytes) -> None:
    """Message formats v0/v1 (every compression codec), read and up-converted as a produce is."""
    try:
        records = list(itertools.islice(iter_legacy_records(data, DECOMPRESSED_LIMIT), 100_000))
        check_allocation(len(records), DECOMPRESSED_LIMIT + len(data))
        up_convert(data, DECOMPRESSED_LIMIT)
    except ProtocolError:
        pass  # CORRUPT_MESSAGE / UNSUPPORTED_COMPRESSION_TYPE


def sasl_plain(data: bytes) -> None:
    try:
        PlainSaslServer({"alice": "alice-secret"}).evaluate_response(data)
    except SaslError:
        pass  # SASL_AUTHENTICATION_FAILED


_CREDENTIAL = ScramCredential.generate(ScramMechanism.SCRAM_SHA_256, "alice-secret", iterations=4096)


def sasl_scram(data: bytes) -> None:
    """The first message, then (after a valid first one) the final one: both halves of the input.

    ``r=*`` in the final message stands for the server's nonce (random each time), so that
    inputs get past the nonce check to the proof's."""
    first, _, final = data.partition(b"\x00")
    server = ScramSaslServer(ScramMechanism.SCRAM_SHA_256, lambda _m, _u: _CREDENTIAL)
    try:
        server_first = server.evaluate_response(first)
        nonce = server_first.split(b",")[0]
        server.evaluate_response(final.replace(b"r=*", nonce))
    except SaslError:
        pass


_ZK_READERS: list[Callable[[bytes], object]] = [
    zk_data.decode_controller, zk_data.decode_controller_epoch, lambda d: zk_data.decode_broker_info(1, d),
    zk_data.decode_topic_assignment, lambda d: zk_data.decode_partition_state(d, 0), zk_data.decode_config,
    zk_data.decode_config_change_notification, zk_data.decode_isr_change_notification,
    zk_data.decode_log_dir_event, zk_data.decode_preferred_replica_election, zk_data.decode_cluster_id,
    zk_data.decode_producer_id_block,
]


def zookeeper_json(data: bytes) -> None:
    """The first byte picks the znode reader, the rest is the znode's content."""
    if not data:
        return
    reader = _ZK_READERS[data[0] % len(_ZK_READERS)]
    try:
        reader(data[1:])
    except zk_data.ZkDataError:
        pass  # the znode is refused, as Kafka's KafkaZkClient refuses it


def server_properties(data: bytes) -> None:
    """``server.properties`` text, parsed and validated as the broker starts."""
    text = data.decode("utf-8", "replace")
    props = parse_properties(text)
    try:
        BrokerConfig.model_validate(props)
    except (ValidationError, ValueError):
        pass  # the broker refuses to start, naming the property


def check_allocation(items: int, limit: int) -> None:
    if items > limit:
        raise AssertionError(f"{items} items decoded from at most {limit} bytes")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "request_decoders": request_decoders,
    "record_batches": record_batches,
    "legacy_messages": legacy_messages,
    "sasl_plain": sasl_plain,
    "sasl_scram": sasl_scram,
    "zookeeper_json": zookeeper_json,
    "server_properties": server_properties,
}
