"""testing.process_guard: an unmarked test that starts a process fails, whichever way it starts one."""

from __future__ import annotations

import asyncio
import multiprocessing
import subprocess
import sys
from collections.abc import Callable

import pytest

from testing.process_guard import ProcessGuard


class _Unmarked:
    nodeid = "tests/example.py::test_unmarked"

    def get_closest_marker(self, name: str) -> None:
        return None


def _start_with_subprocess() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def _start_with_asyncio() -> None:
    async def start() -> None:
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    asyncio.run(start())


def _start_with_multiprocessing() -> None:
    multiprocessing.get_context("spawn").Process(target=print).start()


@pytest.mark.parametrize("start", [_start_with_subprocess, _start_with_asyncio, _start_with_multiprocessing])
def test_starting_a_process_in_an_unmarked_test_fails_it(start: Callable[[], None]) -> None:
    guard = ProcessGuard()
    guard.install()
    try:
        with pytest.raises(pytest.fail.Exception, match=r"test_unmarked started a process .* not marked `process`"):
            with guard.watching(_Unmarked()):  # type: ignore[arg-type]
                with pytest.raises(RuntimeError, match="mark it"):
                    start()
    finally:
        guard.uninstall()


def test_a_refusal_the_code_under_test_swallows_still_fails_the_test() -> None:
    guard = ProcessGuard()
    guard.install()
    try:
        with pytest.raises(pytest.fail.Exception), guard.watching(_Unmarked()):  # type: ignore[arg-type]
            try:
                _start_with_subprocess()
            except Exception:
                pass
    finally:
        guard.uninstall()

