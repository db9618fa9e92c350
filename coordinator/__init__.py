"""Group and transaction coordinators (not built yet)."""
