"""``pafka dump-log``: print segments and indexes the way ``kafka-dump-log.sh`` does.

For a ``.log`` file: one line per batch (offsets, producer fields, position,
timestamp, size, codec, CRC and whether it is valid) and, with
``--deep-iteration`` or ``--print-data-log``, one ``| offset: ...`` line per
record (key and payload with ``--print-data-log``). For ``.index`` and
``.timeindex`` files: one line per entry, then the entries that do not point
at a batch start ("Mismatches in ..."), as Kafka's tool reports them.
``--index-sanity-check`` only runs the index sanity check. ``--offsets-decoder``
prints the records of ``__consumer_offsets`` decoded (``tools.offsets_decoder``),
and implies ``--print-data-log`` as in Kafka.

A segment of ``LARGE_SEGMENT_BYTES`` or more shows how far the dump got on stderr (a bar on a terminal,
a line every few seconds otherwise), the dump itself staying on stdout.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from protocol.compression import codec_name
from protocol.control_records import parse_end_txn_marker
from protocol.errors import ProtocolError
from protocol.record_batch import RecordBatchHeader, is_crc_valid
from protocol.records import iter_records
from storage.errors import CorruptIndexError
from storage.file_records import FileRecords
from storage.offset_index import OffsetIndex
from storage.time_index import TimeIndex
from storage.transaction_index import TransactionIndex
from tools.offsets_decoder import decode_record
from tools.progress_output import command_progress

Echo = Callable[[str], None]
#: Segments this large (Kafka's default segment.bytes is 1 GiB) take long enough to show progress.
LARGE_SEGMENT_BYTES = 64 << 20


def _timestamp_label(header: RecordBatchHeader) -> str:
    return "LogAppendTime" if header.timestamp_type else "CreateTime"


def _batch_line(position: int, header: RecordBatchHeader, valid: bool) -> str:
    horizon = f"OptionalLong[{header.delete_horizon_ms}]" if header.has_delete_horizon else "OptionalLong.empty"
    return (
        f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
        f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
        f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
        f"partitionLeaderEpoch: {header.partition_leader_epoch} isTransactional: {str(header.is_transactional).lower()} "
        f"isControl: {str(header.is_control).lower()} deleteHorizonMs: {horizon} position: {position} "
        f"{_timestamp_label(header)}: {header.max_timestamp} size: {header.size_in_bytes} magic: {header.magic} "
        f"compresscodec: {codec_name(header.compression_type)} crc: {header.crc} isvalid: {str(valid).lower()}"
    )


def _show(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _record_lines(batch: bytes, header: RecordBatchHeader, print_data: bool, offsets: bool = False) -> list[str]:
    lines = []
    for index, record in enumerate(iter_records(batch)):
        sequence = -1 if header.base_sequence < 0 else (header.base_sequence + index) % 0x80000000
        line = (
            f"| offset: {record.offset} {_timestamp_label(header)}: {record.timestamp} "
            f"keySize: {-1 if record.key is None else len(record.key)} "
            f"valueSize: {-1 if record.value is None else len(record.value)} sequence: {sequence} "
            f"headerKeys: [{','.join(k for k, _ in record.headers)}]"
        )
        if header.is_control:
            try:
                marker = parse_end_txn_marker(record)
                line += f" endTxnMarker: {marker.control_type.name} coordinatorEpoch: {marker.coordinator_epoch}"
            except ProtocolError:
                pass
        elif offsets:
            key, payload = decode_record(record.offset, record.key, record.value)
            line += f" key: {key}" + ("" if payload is None else f" payload: {payload}")
        elif print_data:  # as Kafka: a null key or value is left out
            if record.key is not None:
                line += f" key: {_show(record.key)}"
            if record.value is not None:
                line += f" payload: {_show(record.value)}"
        lines.append(line)
    return lines


def dump_log_segment(path: Path, echo: Echo, deep: bool, print_data: bool, offsets: bool = False,
                     on_batch: Callable[[int], None] | None = None) -> None:
    """Print the segment's batches (and records); ``on_batch`` is told each batch's size as it is printed."""
    records = FileRecords(path)
    try:
        echo(f"Log starting offset: {int(path.name[:20]) if path.name[:20].isdigit() else 0}")
        position = 0
        try:
            for position, header in records.batch_headers(0):
                batch = records.read(position, header.size_in_bytes)
                echo(_batch_line(position, header, is_crc_valid(batch, 0, header)))
                if deep or print_data or offsets:
                    for line in _record_lines(batch, header, print_data, offsets):
                        echo(line)
                position += header.size_in_bytes
                if on_batch is not None:
                    on_batch(header.size_in_bytes)
        except ProtocolError as exc:
            echo(f"Found invalid batch at position {position}: {exc}")
            return
        if position < records.size:
            echo(f"Found {records.size - position} invalid bytes at the end of {path.name}")
    finally:
        records.close()


def _dump_large_segment(path: Path, echo: Echo, deep: bool, print_data: bool, offsets: bool) -> None:
    with command_progress(f"Dumping {path.name}", path.stat().st_size, "B", prints_to_stdout=True) as progress:
        dump_log_segment(path, echo, deep, print_data, offsets, on_batch=progress.advance)


def _batch_starts(log_path: Path) -> dict[int, RecordBatchHeader]:
    if not log_path.exists():
        return {}
    records = FileRecords(log_path)
    try:
        return dict(records.batch_headers(0))
    except ProtocolError:
        return {}
    finally:
        records.close()


def dump_offset_index(path: Path, echo: Echo, sanity_only: bool) -> None:
    base = int(path.name[:20])
    index = OffsetIndex(path, base, writable=False)
    try:
        if index.entries == 0:
            echo(f"{path} is empty.")
            return
        if sanity_only:
            _sanity(path, index.sanity_check, echo)
            return
        starts = _batch_starts(path.with_name(path.name[:20] + ".log"))
        mismatches = []
        for slot in range(index.entries):
            entry = index.entry(slot)
            if entry.offset == base and slot > 0:
                break  # the zero-filled tail of a preallocated index after a crash
            echo(f"offset: {entry.offset} position: {entry.position}")
            header = starts.get(entry.position)
            if header is None:
                mismatches.append(f"  Index offset: {entry.offset}, log offset: -1 "
                                  f"(position {entry.position} is not the start of a batch)")
            elif header.last_offset != entry.offset:
                mismatches.append(f"  Index offset: {entry.offset}, log offset: {header.last_offset}")
        _report(f"Mismatches in :{path.resolve()}", mismatches)
    finally:
        index.close_handler()


def dump_time_index(path: Path, echo: Echo, sanity_only: bool) -> None:
    base = int(path.name[:20])
    index = TimeIndex(path, base, writable=False)
    try:
        if sanity_only:
            _sanity(path, index.sanity_check, echo)
            return
        starts = _batch_starts(path.with_name(path.name[:20] + ".log"))
        by_last_offset = {h.last_offset: h for h in starts.values()}
        not_found, mismatched = [], []
        for slot in range(index.entries):
            entry = index.entry(slot)
            if entry.offset == base and slot > 0:
                break
            echo(f"timestamp: {entry.timestamp} offset: {entry.offset}")
            header = by_last_offset.get(entry.offset)
            if header is None:
                containing = next((h.last_offset for h in starts.values()
                                   if h.base_offset <= entry.offset <= h.last_offset), -1)
                not_found.append(f"  Indexed offset: {entry.offset}, found log offset: {containing}")
            elif header.max_timestamp != entry.timestamp:
                mismatched.append(f"  Index timestamp: {entry.timestamp}, log timestamp: {header.max_timestamp}")
        _report(f"Found timestamp mismatch in :{path.resolve()}", mismatched)
        _report(f"The following indexed offsets are not found in the log in :{path.resolve()}", not_found)
    finally:
        index.close_handler()


def _err(line: str) -> None:
    """Problems go to stderr, as kafka-dump-log.sh prints them."""
    click.echo(line, err=True)


def _report(title: str, problems: list[str]) -> None:
    if problems:
        _err(title)
        for line in problems:
            _err(line)


def _sanity(path: Path, check: Callable[[], None], echo: Echo) -> None:
    try:
        check()
        echo(f"{path} passed sanity check.")
    except CorruptIndexError as exc:
        echo(f"Found a corrupted index file, {path}: {exc}")


def dump_file(path: Path, echo: Echo, deep: bool = False, print_data: bool = False, index_sanity_check: bool = False,
              offsets_decoder: bool = False) -> None:
    echo(f"Dumping {path}")
    name = path.name
    if name.endswith(".log") and path.stat().st_size >= LARGE_SEGMENT_BYTES:
        _dump_large_segment(path, echo, deep, print_data, offsets_decoder)
    elif name.endswith(".log"):
        dump_log_segment(path, echo, deep, print_data, offsets_decoder)
    elif name.endswith(".index"):
        dump_offset_index(path, echo, index_sanity_check)
    elif name.endswith(".timeindex"):
        dump_time_index(path, echo, index_sanity_check)
    elif name.endswith(".txnindex"):
        index = TransactionIndex(path, int(name[:20]))
        for txn in index.entries:
            echo(f"version: 0 producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
                 f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}")
        if index_sanity_check:
            _sanity(path, index.sanity_check, echo)
    elif name.endswith(".snapshot"):
        echo(f"Producer state snapshot {path} (pafka's own format; see storage/producer_state.py)")
    else:
        echo(f"Ignoring unknown file {path}")


@click.command("dump-log")
@click.option("--files", "files", multiple=True, required=True,
              help="Comma-separated or repeated list of .log/.index/.timeindex files to dump.")
@click.option("--print-data-log", is_flag=True, help="Print the records' keys and payloads (implies --deep-iteration).")
@click.option("--deep-iteration", is_flag=True, help="Print every record, not just batch headers.")
@click.option("--index-sanity-check", is_flag=True, help="Only check the index files' sanity.")
@click.option("--offsets-decoder", is_flag=True,
              help="Decode the records as those of __consumer_offsets (implies --print-data-log).")
def dump_log_command(files: tuple[str, ...], print_data_log: bool, deep_iteration: bool, index_sanity_check: bool,
                     offsets_decoder: bool) -> None:
    """Dump segment and index files as kafka-dump-log.sh does."""
    paths = [Path(p) for item in files for p in item.split(",") if p]
    for path in paths:
        if not path.is_file():
            raise click.BadParameter(f"{path} is not a file", param_hint="--files")
        dump_file(path, click.echo, deep_iteration, print_data_log, index_sanity_check, offsets_decoder)
