"""Replication: the partitions this broker hosts, and the only way into their data.

``ReplicaManager`` (appends, fetches, offset lookups, DeleteRecords) over
``Partition`` (a log plus leader epoch, ISR and high watermark), with the
purgatories beside it: ``delayed_fetch`` (long polls) and ``delayed_produce``
(acks=all waiting for the high watermark), and the ``append_thread`` where
appends that may block run in arrival order.

Cluster mode (a broker with ``zookeeper.connect``) adds, in
``replica_manager_cluster``: the controller's LeaderAndIsr and StopReplica
(``replica_state_changes``), the leader's view of its followers (``replica``)
and its ISR changes (``partition_state``), sent to the controller by the
``alter_partition_manager``, and the follower fetchers
(``replica_fetcher_manager``, ``replica_fetcher_thread``). A broker without
ZooKeeper starts none of it. Imports storage/, protocol/ and client/ only.
"""
