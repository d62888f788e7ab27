"""The one back-off every retry loop uses (`runtime.process.backoff`)."""

from __future__ import annotations

from runtime.process import Backoff

SAMPLES = 200


def test_each_wait_is_drawn_under_a_ceiling_doubling_up_to_the_cap() -> None:
    ceilings = [0.25, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    for _ in range(SAMPLES):
        backoff = Backoff(0.25, 5.0)
        for ceiling in ceilings:
            assert backoff.ceiling == ceiling
            said = backoff.delay
            wait = backoff.failed()
            assert wait == said, "the wait a log line announced is the one taken"
            assert ceiling / 2 <= wait <= ceiling <= 5.0


def test_the_waits_grow_and_are_spread() -> None:
    backoffs = [Backoff(0.25, 5.0) for _ in range(SAMPLES)]
    drawn = [[backoff.failed() for backoff in backoffs] for _ in range(5)]
    means = [sum(column) / SAMPLES for column in drawn]
    assert means == sorted(means) and means[-1] > 4 * means[0], means
    # Processes that lost the same server at once do not all ask again at once.
    assert all(len({round(wait, 6) for wait in column}) > SAMPLES / 2 for column in drawn)


def test_a_success_starts_over() -> None:
    backoff = Backoff(1.0, 30.0)
    backoff.failed()
    backoff.failed()
    assert backoff.ceiling == 4.0
    backoff.succeeded()
    assert backoff.ceiling == 1.0
    assert 0.5 <= backoff.failed() <= 1.0


def test_a_first_wait_above_the_cap_is_capped() -> None:
    assert 4.0 <= Backoff(10.0, 8.0).failed() <= 8.0


def test_a_long_outage_stays_at_the_cap() -> None:
    backoff = Backoff(0.1, 30.0)
    waits = [backoff.failed() for _ in range(5000)]
    assert 15.0 <= waits[-1] <= 30.0
    assert backoff.ceiling == 30.0
