"""The process's CPU, memory and file descriptors: prometheus_client's process metrics, same names.

prometheus_client's ProcessCollector counts open descriptors by listing ``/proc/self/fd``; a broker
holds three files a segment, thousands with 1,000 partitions, and the listing was the largest part
of a scrape. Linux (6.2 on) gives the count as the size of that directory, without listing it; older
kernels report 0 there, and the listing is the fallback. The descriptor limit comes from
``getrlimit`` instead of parsing ``/proc/self/limits``.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric

from broker.metrics.families import counter, gauge

PROC_SELF = "/proc/self"
_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = resource.getpagesize()


def boot_time() -> float:
    """The host's boot time (seconds since the epoch), 0 where ``/proc/stat`` cannot be read."""
    try:
        with open("/proc/stat", "rb") as stat:
            for line in stat:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def open_fds() -> int:
    counted = os.stat(f"{PROC_SELF}/fd").st_size
    return counted if counted > 0 else len(os.listdir(f"{PROC_SELF}/fd"))


def max_fds() -> float:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return math.inf if soft == resource.RLIM_INFINITY else soft


class ProcessMetricsCollector:
    """process_* as prometheus_client's ProcessCollector names them (none where /proc is missing)."""

    def __init__(self) -> None:
        self._boot_time = boot_time()

    def collect(self) -> Iterator[Metric]:
        if not self._boot_time:
            return
        try:
            with open(f"{PROC_SELF}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[-1].split()
            fds = open_fds()
        except OSError:
            return
        yield gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.").add(int(fields[20])).metric
        yield gauge("process_resident_memory_bytes", "Resident memory size in bytes.").add(
            int(fields[21]) * _PAGE_SIZE).metric
        yield gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.").add(
            int(fields[19]) / _TICKS + self._boot_time).metric
        yield counter("process_cpu_seconds", "Total user and system CPU time spent in seconds.").add(
            (int(fields[11]) + int(fields[12])) / _TICKS).metric
        yield gauge("process_open_fds", "Number of open file descriptors.").add(fds).metric
        yield gauge("process_max_fds", "Maximum number of open file descriptors.").add(max_fds()).metric
