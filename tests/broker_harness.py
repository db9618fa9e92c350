"""Transitional: the broker launcher and socket helpers moved to ``testing/``.

Import ``testing.broker_process.BrokerProcess`` (``with BrokerProcess(*overrides) as broker``)
and ``testing.sockets`` (``free_port``, ``send_request``, ``read_frame``) instead. This module
only keeps the old names for a test written against them while the move happened
(tests/tools/test_async_connection.py); delete it once nothing imports it.
"""

from __future__ import annotations

from testing import broker_process
from testing.sockets import free_port as free_loopback_port
from testing.sockets import send_request

__all__ = ["BrokerProcess", "free_loopback_port", "send_request"]


class BrokerProcess(broker_process.BrokerProcess):
    @classmethod
    def started(cls, *overrides: str) -> BrokerProcess:
        """The old spelling of ``BrokerProcess(*overrides)`` for ``with``."""
        return cls(*overrides)
