"""The classic group coordinator: group membership, committed offsets, ``__consumer_offsets``."""
