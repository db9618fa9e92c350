"""Share groups (KIP-932): the share partitions' durable state and the share coordinator.

``persister`` is the one interface between the share partitions on the
partition leaders and the durable state the share coordinator keeps in
``__share_group_state``.
"""
