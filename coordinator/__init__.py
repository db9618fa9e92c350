"""Coordinators: the group coordinator (``group/``) on shared interfaces (``common/``).

A transaction coordinator will sit beside the group coordinator in
``transaction/`` on the same interfaces. Coordinators import replication/,
storage/ and protocol/, never broker/: the broker wires them
(``broker.coordinator_wiring``).
"""
