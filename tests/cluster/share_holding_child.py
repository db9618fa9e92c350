"""testing/share_consumer_child.py's share consumer that holds each batch ``HOLD_S`` before acknowledging it, so
a broker killed at any moment most likely finds records acquired and not yet acknowledged.

    python -m tests.cluster.share_holding_child <share_consumer_child's arguments>"""

from __future__ import annotations

import time
from typing import Any

from testing import share_consumer_child

HOLD_S = 0.3
_acknowledge = share_consumer_child.acknowledge_batch


def holding_acknowledge(*args: Any) -> None:
    time.sleep(HOLD_S)
    _acknowledge(*args)


if __name__ == "__main__":
    share_consumer_child.acknowledge_batch = holding_acknowledge
    share_consumer_child.main()
