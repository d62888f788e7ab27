"""A process's memory of what it learnt from Slack: kept for its time, then read again."""

from __future__ import annotations

from bot.slack.memo import Memo


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_value_is_kept_for_its_time_and_not_a_moment_longer() -> None:
    clock = Clock()
    memo: Memo[str] = Memo(300, clock=clock)
    memo.put("UBOB", "member")
    clock.now += 299.9
    assert memo.get("UBOB") == "member"
    clock.now += 0.1
    assert memo.get("UBOB") is None, "as stale as the Redis cache it stands for, no more"
    assert memo.get("UALICE") is None


def test_writing_again_starts_its_time_anew_and_the_oldest_go_first() -> None:
    clock = Clock()
    memo: Memo[int] = Memo(10, limit=2, clock=clock)
    memo.put("a", 1)
    clock.now += 5
    memo.put("b", 2)
    memo.put("a", 3)  # newest now
    memo.put("c", 4)  # over the limit: "b" was written longest ago
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == (3, None, 4)
    clock.now += 9
    assert memo.get("a") == 3
