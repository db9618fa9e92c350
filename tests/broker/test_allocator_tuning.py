"""The broker keeps large frames in memory it already touched (broker_command._tune_allocator)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# Receives 50 rounds of 8 frames of 1 MiB, all in flight at once (a leader taking produce requests
# from several connections, a follower's answers from several leaders), and counts page faults.
_FRAMES = textwrap.dedent("""
    import resource, sys
    from broker import broker_command
    if sys.argv[1] == "tuned":
        assert broker_command._tune_allocator()

    def round_of_frames():
        frames = [bytearray(1 << 20) for _ in range(8)]
        for frame in frames:
            frame[::4096] = b"x" * 256  # the socket fills every page

    round_of_frames()  # the first round faults in any case: only the later ones are counted
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        round_of_frames()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _page_faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _FRAMES, mode], capture_output=True, text=True, check=True,
                         timeout=60)
    return int(out.stdout)


def test_freed_frames_are_reused_without_page_faults() -> None:
    # 400 frames of 256 pages: mapped afresh (or trimmed away and faulted back) each round,
    # that is about 100,000 faults.
    assert _page_faults("default") > 20_000
    assert _page_faults("tuned") < 1_000
