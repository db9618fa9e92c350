"""Replication: the partitions this broker hosts, and the only way into their data.

``ReplicaManager`` (appends, fetches, offset lookups, DeleteRecords) over
``Partition`` (a log plus leader epoch, ISR and high watermark), with the
purgatories beside it: ``delayed_fetch`` (long polls) and ``delayed_produce``
(acks=all waiting for the high watermark), and the ``append_thread`` where
appends that may block run in arrival order. Follower fetchers and ISR changes
build on these. Imports storage/ and protocol/ only.
"""
