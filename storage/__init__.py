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

Modules, one per Kafka concept, bottom-up: each imports only protocol/ and
modules listed before it, never one after it (``tests/storage/test_module_layers``
checks there is no loop, counting imports inside functions too)::

    errors, log_config (LogConfig), checkpoints   errors; topic settings; checkpoint files, atomic writes
    abstract_index, offset_index, time_index,     the ``.index``, ``.timeindex`` and ``.txnindex`` files
      transaction_index
    file_records                                  a ``.log`` file
    log_segment                                   one segment: its ``.log`` and its indexes
    segment_list                                  SegmentList: a partition's segments by base offset
    producer_state_entry, producer_state          idempotence and transactions; ``.snapshot`` files
    leader_epoch_cache                            LeaderEpochFileCache (``leader-epoch-checkpoint``)
    offset_map                                    the cleaner's key -> latest offset map
    log_append                                    what an append checks before it writes
    log_conversion                                Produce v0-v2's message sets checked and up-converted
    log_offsets                                   ListOffsets searches over segments
    log_retention                                 which segments retention may delete
    log_deletion                                  the Log's removal of segments: retention pass,
                                                  delayed deletion, cleaned-segment swap (a mixin)
    log_loader                                    opening a directory: swaps, index checks, recovery,
                                                  producer-state replay; returns a LoadedLog
    log                                           Log, one partition's log: open, append, read, roll,
                                                  flush, truncation
    compaction                                    one compaction pass, over the CleanerLog that Log is
    log_cleaner                                   which compacted logs to clean; cleaner checkpoint
    log_manager                                   all logs of the broker, their checkpoints, passes

The direction: the parts of a log (segments, indexes, producer state, epoch
cache) sit below ``log``; what reads a directory into those parts
(``log_loader``) or judges them (``log_offsets``, ``log_retention``) is given
the parts, not the Log, so it sits below ``log`` too, and ``Log.open`` builds
the Log on the loader's answer. What works on whole Logs (``log_cleaner``,
``log_manager``) sits above ``log``.
"""
