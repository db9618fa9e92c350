"""Named values of request fields, as Kafka's request classes define them.

The schemas type these fields as plain integers; the meaning of each value is
Kafka's:

- ``IsolationLevel`` of Fetch and ListOffsets (Kafka's ``IsolationLevel``):
  READ_UNCOMMITTED 0 reads to the high watermark, READ_COMMITTED 1 to the last
  stable offset, without aborted transactions.
- ListOffsets' special ``Timestamp`` values (Kafka's ``ListOffsetsRequest``
  constants): LATEST -1, EARLIEST -2, MAX -3 (KIP-734), EARLIEST_LOCAL -4
  (KIP-405), LATEST_TIERED -5 (KIP-1005), EARLIEST_PENDING_UPLOAD -6 (KIP-1023).
- Fetch's incremental sessions (KIP-227, Kafka's ``FetchMetadata``): session id 0
  is no session; epoch 0 (INITIAL) opens one, -1 (FINAL) is a sessionless full
  fetch that closes the named session, and N > 0 continues one.
- FindCoordinator's ``KeyType`` (Kafka's ``FindCoordinatorRequest.CoordinatorType``):
  GROUP 0, TRANSACTION 1, SHARE 2 (KIP-932).
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_PENDING_UPLOAD_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_SESSION_EPOCH",
    "MAX_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "CoordinatorType",
]

INVALID_SESSION_ID: Final = 0
INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
#: After this epoch a session's next is 1 (0 would open a new session).
MAX_SESSION_EPOCH: Final = 2**31 - 1

READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1

LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL_TIMESTAMP: Final = -4
LATEST_TIERED_TIMESTAMP: Final = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP: Final = -6


class CoordinatorType(enum.IntEnum):
    """FindCoordinator's key type: which coordinator a key names."""

    GROUP = 0
    TRANSACTION = 1
    SHARE = 2
