"""Message codec microbenchmarks: pafka's generated codecs against kio, same run.

Three cases (the targets of issue 2):

1. decode a ProduceRequest v9 carrying one 16 KiB batch;
2. encode a ProduceResponse v9 for one partition;
3. encode a FetchResponse v12 with 10 partitions x 64 KiB of records.

pafka is timed through its public entry points (``decode_request`` /
``encode_response``: size prefix and header included; records stay uncopied
chunks) and, for comparison with kio's body-only API, on the body alone.
kio 0.6.5 reads with its Rust extension and writes with Python into a BytesIO
(which copies the records). Each figure is the best of ``--repeat`` timing runs
of ``--number`` calls, in microseconds per call.

    .venv/bin/python benchmarks/micro/protocol_codecs.py
"""

from __future__ import annotations

import argparse
import datetime
import io
import timeit
from collections.abc import Callable

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.fetch.v12 import response as kio_fetch
from kio.schema.produce.v9 import request as kio_produce_req
from kio.schema.produce.v9 import response as kio_produce_resp
from kio.serial import entity_reader, entity_writer

from protocol.api import decode_request, encode_request, encode_response
from protocol.buffers import join_chunks
from protocol.messages import fetch, produce

BATCH = bytes(range(256)) * 64  # 16 KiB
RECORDS_64K = [memoryview(bytes([i]) * 65536) for i in range(10)]


def produce_request() -> produce.ProduceRequest:
    return produce.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            produce.TopicProduceData(
                name="benchmark-topic", partition_data=[produce.PartitionProduceData(index=0, records=BATCH)]
            )
        ],
    )


def produce_response() -> produce.ProduceResponse:
    partition = produce.PartitionProduceResponse(index=0, error_code=0, base_offset=123456, log_start_offset=0)
    return produce.ProduceResponse(
        responses=[produce.TopicProduceResponse(name="benchmark-topic", partition_responses=[partition])]
    )


def fetch_response() -> fetch.FetchResponse:
    partitions = [
        fetch.PartitionData(
            partition_index=i,
            high_watermark=1000,
            last_stable_offset=1000,
            log_start_offset=0,
            aborted_transactions=None,
            records=RECORDS_64K[i],
        )
        for i in range(10)
    ]
    return fetch.FetchResponse(responses=[fetch.FetchableTopicResponse(topic="benchmark-topic", partitions=partitions)])


def kio_produce_response() -> kio_produce_resp.ProduceResponse:
    partition = kio_produce_resp.PartitionProduceResponse(
        index=0,
        error_code=KioErrorCode.none,
        base_offset=123456,
        log_append_time=None,
        log_start_offset=0,
        record_errors=(),
        error_message=None,
    )
    return kio_produce_resp.ProduceResponse(
        responses=(kio_produce_resp.TopicProduceResponse(name="benchmark-topic", partition_responses=(partition,)),),
        throttle_time=datetime.timedelta(0),
    )


def kio_fetch_response() -> kio_fetch.FetchResponse:
    partitions = tuple(
        kio_fetch.PartitionData(
            partition_index=i,
            error_code=KioErrorCode.none,
            high_watermark=1000,
            last_stable_offset=1000,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=bytes(RECORDS_64K[i]),
        )
        for i in range(10)
    )
    return kio_fetch.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=KioErrorCode.none,
        session_id=0,
        responses=(kio_fetch.FetchableTopicResponse(topic="benchmark-topic", partitions=partitions),),
    )


def kio_write(entity: object) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def best_us(func: Callable[[], object], number: int, repeat: int) -> float:
    return min(timeit.repeat(func, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=20000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs per case (best is reported)")
    args = parser.parse_args()

    request_frame = join_chunks(encode_request(0, 9, 7, "bench", produce_request()))[4:]
    request_body = produce_request().to_bytes(9)
    read_kio_request = entity_reader(kio_produce_req.ProduceRequest)
    write_kio_produce = entity_writer(kio_produce_resp.ProduceResponse)
    write_kio_fetch = entity_writer(kio_fetch.FetchResponse)
    p_resp, k_resp = produce_response(), kio_produce_response()
    f_resp, k_fetch = fetch_response(), kio_fetch_response()

    # Both sides must put the same bytes on the wire for the comparison to mean anything.
    assert produce.ProduceRequest.decode(request_body, 9) == produce_request()
    assert p_resp.to_bytes(9) == kio_write(k_resp)
    assert f_resp.to_bytes(12) == kio_write(k_fetch)

    def kio_encode_produce() -> None:
        write_kio_produce(io.BytesIO(), k_resp)

    def kio_encode_fetch() -> None:
        write_kio_fetch(io.BytesIO(), k_fetch)

    n, r = args.number, args.repeat
    rows = [
        (
            "decode ProduceRequest v9, one 16 KiB batch",
            best_us(lambda: decode_request(request_frame), n, r),
            best_us(lambda: produce.ProduceRequest.decode(request_body, 9), n, r),
            best_us(lambda: read_kio_request(request_body, 0), n, r),
            5.0,
        ),
        (
            "encode ProduceResponse v9, one partition",
            best_us(lambda: encode_response(0, 9, 7, p_resp), n, r),
            best_us(lambda: p_resp.encode(9), n, r),
            best_us(kio_encode_produce, n, r),
            3.0,
        ),
        (
            "encode FetchResponse v12, 10 x 64 KiB records",
            best_us(lambda: encode_response(1, 12, 7, f_resp), n // 4, r),
            best_us(lambda: f_resp.encode(12), n // 4, r),
            best_us(kio_encode_fetch, max(1, n // 40), r),
            20.0,
        ),
    ]
    print(f"{'case':<48} {'pafka api':>10} {'pafka body':>11} {'kio body':>10} {'target':>7}  (us per call)")
    for name, api_us, body_us, kio_us, target in rows:
        print(f"{name:<48} {api_us:>10.2f} {body_us:>11.2f} {kio_us:>10.2f} {target:>7.1f}")


if __name__ == "__main__":
    main()
