"""strand.client.retries: a blocking call tried again while the gateway cannot be
reached, until its deadline, on a fake clock."""

from __future__ import annotations

import pytest

from strand.client.channel import TransportError
from strand.client.retries import Backoff, transient, until_deadline
from strand.errors import RequestTimedOutError, StrandError, UnknownTopicOrPartitionError


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def unavailable() -> TransportError:
    return TransportError("Metadata to gateway g failed: UNAVAILABLE", "UNAVAILABLE", True)


def run(outcomes: list[StrandError | str], timeout_s: float, fake: FakeTime,
        spent_per_attempt: float = 0.0) -> tuple[str, list[float]]:
    """until_deadline over attempts that fail or return in ``outcomes``' order; the
    result and the time each attempt was given."""
    given: list[float] = []

    def attempt(seconds: float) -> str:
        given.append(seconds)
        fake.now += spent_per_attempt
        outcome = outcomes.pop(0)
        if isinstance(outcome, StrandError):
            raise outcome
        return outcome

    result = until_deadline(attempt, timeout_s, clock=fake.clock, sleep=fake.sleep)
    return result, given


def test_an_unreachable_gateway_is_tried_again_until_it_answers() -> None:
    fake = FakeTime()
    result, given = run([unavailable(), unavailable(), unavailable(), "answer"], 10, fake)
    assert result == "answer"
    assert fake.sleeps == [0.1, 0.2, 0.4]  # growing waits
    # each attempt gets the time that is left
    assert given == pytest.approx([10, 9.9, 9.7, 9.3])


def test_waits_grow_to_their_cap() -> None:
    backoff = Backoff(initial_s=0.1, max_s=1.0)
    assert [backoff.after(n) for n in range(1, 7)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


def test_the_last_failure_is_raised_once_the_deadline_comes() -> None:
    fake = FakeTime()
    failures: list[StrandError | str] = [unavailable() for _ in range(10)]
    outcomes = list(failures)
    with pytest.raises(TransportError) as info:
        run(outcomes, 2.0, fake, spent_per_attempt=0.05)
    attempts = len(failures) - len(outcomes)
    assert attempts == 5  # at 0, 0.15, 0.45, 0.9 and 1.75 s: waiting 1 s more is too late
    assert info.value is failures[attempts - 1]
    assert fake.now <= 100.0 + 2.0  # no wait goes past the deadline


def test_an_answered_refusal_is_not_tried_again() -> None:
    fake = FakeTime()
    refusal = UnknownTopicOrPartitionError("topic 'x' does not exist")
    with pytest.raises(UnknownTopicOrPartitionError):
        run([refusal, "never"], 10, fake)
    assert fake.sleeps == []


def test_a_timed_out_attempt_is_not_tried_again() -> None:
    """An attempt that timed out had all the time that was left."""
    fake = FakeTime()
    with pytest.raises(RequestTimedOutError):
        run([RequestTimedOutError("Metadata timed out"), "never"], 10, fake)
    assert fake.sleeps == []


@pytest.mark.parametrize(("error", "expected"), [
    (TransportError("down", "UNAVAILABLE", True), True),
    (TransportError("refused", "UNIMPLEMENTED", False), False),
    (RequestTimedOutError("slow"), False),
    (UnknownTopicOrPartitionError("gone"), False),
])
def test_transient_failures(error: StrandError, expected: bool) -> None:
    assert transient(error) is expected
