"""The transaction coordinator's state: ``__transaction_state`` and the state machine of each transactional id.

``transaction_log`` holds Kafka's record formats, ``transaction_metadata``
the pure state machine (prepare a transition, write it, then complete it),
``transaction_state_manager`` the cache of the partitions this broker leads,
loaded from and appended to the log through coordinator/common's
``CoordinatorLog``. The broker wires it (``broker.coordinator_wiring``).
"""
