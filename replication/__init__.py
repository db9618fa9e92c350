"""Replication: the partitions this broker hosts, and the only way into their data.

``ReplicaManager`` (appends, fetches, offset lookups, DeleteRecords) over
``Partition`` (a log plus leader epoch, ISR and high watermark). It owns the
hosted partitions (``hosted_partitions``) and the purgatories
(``purgatories``: ``delayed_fetch`` for long polls, ``delayed_produce`` for
acks=all waiting for the high watermark) and hands each concept to a
collaborator: ``replica_appender`` (appends, on the loop or the
``append_thread``, in arrival order), ``replica_reader`` (fetches),
``replica_manager_lookups``, ``txn_marker_writer``.

Cluster mode (a broker with ``zookeeper.connect``) adds: the controller's
LeaderAndIsr and StopReplica (``replica_state_changes``, fed
``state_change_requests`` by the request handlers), the leader's view of its
followers (``replica``, ``isr_manager``) and its ISR changes
(``partition_state``), sent to the controller by the
``alter_partition_manager``, and the follower fetchers
(``replica_fetcher_manager``, ``replica_fetcher_thread``). A broker without
ZooKeeper starts none of it. Imports storage/, protocol/ and client/ only.
"""
