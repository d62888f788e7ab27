"""The one back-off every retry loop uses (`runtime.process.backoff`)."""

from __future__ import annotations

from runtime.process import Backoff


def test_doubles_after_each_failure_up_to_the_cap() -> None:
    backoff = Backoff(0.25, 5.0)
    assert [backoff.failed() for _ in range(7)] == [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.delay == 5.0


def test_a_success_starts_over() -> None:
    backoff = Backoff(1.0, 30.0)
    backoff.failed()
    backoff.failed()
    assert backoff.delay == 4.0
    backoff.succeeded()
    assert backoff.failed() == 1.0


def test_a_first_wait_above_the_cap_is_capped() -> None:
    assert Backoff(10.0, 8.0).failed() == 8.0
