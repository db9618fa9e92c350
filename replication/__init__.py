"""Replication: ISR, high watermark and leader-epoch fetchers (not built yet)."""
