"""What every coordinator stands on (Kafka's coordinator-common).

A coordinator (the group coordinator today, the transaction coordinator next)
keeps its state in an internal compacted topic and gets from the broker only
narrow interfaces: a :class:`~coordinator.common.coordinator_log.CoordinatorLog`
to append to and load its topic's partitions (over the replica manager), a
:class:`~coordinator.common.scheduler.Scheduler` for its timers, its config
values, and load/unload calls when leadership of its partitions arrives or
leaves. It never imports broker/: the wiring lives there.
"""
