"""Kafka's segmented log on disk: synchronous file I/O, no sockets, no asyncio.

Layout, as Kafka's (under each directory of ``log.dirs``)::

    meta.properties                      version=0, broker.id, cluster.id
    .lock                                flock'ed while the broker runs
    .kafka_cleanshutdown                 present only after a clean shutdown
    recovery-point-offset-checkpoint     "0", count, "topic partition offset" lines
    log-start-offset-checkpoint
    replication-offset-checkpoint        high watermarks
    cleaner-offset-checkpoint            (the log cleaner's)
    <topic>-<partition>/
        00000000000000000000.log         record batches as received, offsets assigned
        00000000000000000000.index       sparse offset -> position (int32, int32)
        00000000000000000000.timeindex   max timestamp -> offset (int64, int32)
        00000000000000000000.txnindex    aborted transactions (only once there is one)
        00000000000000000000.snapshot    producer state (storage.producer_state)
        leader-epoch-checkpoint          "0", count, "epoch startOffset" lines

Modules, one per Kafka concept: ``config`` (LogConfig), ``offset_index``,
``time_index``, ``transaction_index`` (over ``abstract_index``),
``file_records`` (a ``.log`` file), ``log_segment``, ``log_segments``,
``log`` (the partition log: append, read, roll, flush, truncation, segment
replacement), ``log_append`` (validation before a write), ``log_offsets``
(ListOffsets), ``log_loader`` (opening and crash recovery), ``log_retention``,
``leader_epoch_checkpoint``, ``checkpoints``, ``log_manager`` (all logs of the
broker), ``dump_log`` (``pafka dump-log``), ``log_cleaner``/``cleaner``/
``offset_map`` (compaction) and ``producer_state``.
"""
