"""pytest_pafka.waiting: the polling helper every multi-process test waits with."""

from __future__ import annotations

import asyncio

import pytest

from pytest_pafka.waiting import WaitTimeout, wait_until, wait_until_async


def test_returns_the_first_truthy_value() -> None:
    answers = iter([None, [], 0, ["ready"]])
    assert wait_until(lambda: next(answers), 5, "an answer", interval=0) == ["ready"]


def test_times_out_naming_what_it_waited_for_then_the_details() -> None:
    reads: list[str] = []

    def details() -> str:
        reads.append("read")
        return "broker logs"

    with pytest.raises(TimeoutError) as raised:
        wait_until(list, 0.05, "the leader", interval=0.01, details=details)
    assert str(raised.value) == "the leader: not within 0.05s (last: [])\nbroker logs"
    assert reads == ["read"]  # read once, at the timeout only


def test_the_timeout_is_an_assertion_failure_too() -> None:
    with pytest.raises(AssertionError, match="the leader: not within"):
        wait_until(lambda: 0, 0.02, "the leader", interval=0.01)


def test_ignored_exceptions_count_as_not_yet() -> None:
    answers = iter([ConnectionRefusedError(), None, "up"])

    def probe() -> str | None:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_until(probe, 5, "the broker", interval=0, ignoring=(ConnectionRefusedError,)) == "up"
    with pytest.raises(ZeroDivisionError):  # anything else is not waited out
        wait_until(lambda: 1 / 0, 5, "the broker", interval=0, ignoring=(ConnectionRefusedError,))


def test_the_async_wait_awaits_coroutines_and_lets_the_loop_run() -> None:
    async def scenario() -> None:
        flags: list[str] = []
        asyncio.get_running_loop().call_later(0.03, flags.append, "set")

        async def asked() -> list[str]:
            return flags

        assert await wait_until_async(asked, 5, "the flag") == ["set"]
        assert await wait_until_async(lambda: flags, 5, "the flag") == ["set"]
        with pytest.raises(WaitTimeout, match=r"the other flag: not within 0.02s \(last: False\)"):
            await wait_until_async(lambda: "other" in flags, 0.02, "the other flag")

    asyncio.run(scenario())


def test_until_decides_on_the_probe_s_answer_and_reports_it() -> None:
    answers = iter([[1, 2, 3], [1, 2], [1, 2]])
    assert wait_until(lambda: next(answers), 5, "ISR [1, 2]", interval=0, until=lambda isr: isr == [1, 2]) == [1, 2]
    with pytest.raises(WaitTimeout, match=r"ISR \[1\]: not within 0.02s \(last: \[1, 2\]\)"):
        wait_until(lambda: [1, 2], 0.02, "ISR [1]", interval=0.01, until=lambda isr: isr == [1])
