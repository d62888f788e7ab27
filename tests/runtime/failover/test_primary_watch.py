"""The watch over the Redis primary's identity, and the bounded record of recent writes it keeps
(`runtime.failover`): which writes a promoted replica is known to hold, which are looked for,
and what a process without anything to fail over to does (nothing)."""

from __future__ import annotations

import logging
import time

import pytest
import redis.asyncio as aioredis

from runtime.failover import Primary, PrimaryWatch, read_primary
from runtime.failover.identity import NO_ID
from runtime.failover.recent import SETTLING_SECONDS, Recent, Written

OLD = "a" * 40
NEW = "b" * 40


class Looked(Recent[str, Written]):
    """Records what it is asked to look up; found at `offset`, or not settled (None)."""

    def __init__(self, *, found: int | None = 7, seconds: float = 60, most: int = 100) -> None:
        super().__init__(seconds=seconds, most=most)
        self.found = found
        self.asked: list[str] = []

    async def look(self, key: str, entry: Written, primary: Primary) -> int | None:
        self.asked.append(key)
        return self.found


def promoted(second_offset: int) -> Primary:
    """`NEW`, promoted in place of `OLD`, holding its stream up to `second_offset`."""
    return Primary(replid=NEW, offset=second_offset + 50, replid2=OLD, second_offset=second_offset)


async def test_a_primary_reads_its_own_identity(redis_url: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    try:
        primary = await read_primary(client)
    finally:
        await client.aclose()
    assert primary.is_primary
    assert len(primary.replid) == 40
    assert primary.holds(primary.replid, primary.offset)
    assert not primary.holds(primary.replid, primary.offset + 1)


def test_a_promoted_replica_holds_the_old_stream_up_to_where_it_stopped_receiving() -> None:
    new = promoted(second_offset=1000)
    assert new.succeeds(OLD)
    assert new.holds(OLD, 999)
    assert not new.holds(OLD, 1000), "written after the last byte it received"
    assert not new.holds("c" * 40, 10), "another primary's history: not known"
    assert not new.holds(None, 0), "where it was written is not known"
    never = Primary(replid=NEW, offset=10)
    assert not never.holds(NO_ID, 0)


async def test_what_was_noted_before_a_read_is_stamped_with_it_and_nothing_is_looked_up() -> None:
    recent = Looked()
    recent.remember("before", Written(noted=time.monotonic()))
    read_at = time.monotonic()
    recent.remember("after", Written(noted=time.monotonic()))
    await recent.settle(Primary(replid=OLD, offset=500), read_at=read_at, changed_at=-1e9)
    assert (recent.entries["before"].seen_on, recent.entries["before"].offset) == (OLD, 500)
    assert recent.entries["after"].seen_on is None, "the read may not cover what came after it"
    assert recent.asked == []


async def test_after_a_failover_only_what_the_new_primary_may_lack_is_looked_up() -> None:
    recent = Looked(found=1200)
    now = time.monotonic()
    recent.remember("carried", Written(noted=now, seen_on=OLD, offset=900))
    recent.remember("beyond", Written(noted=now, seen_on=OLD, offset=1000))
    recent.remember("unstamped", Written(noted=now))
    await recent.settle(promoted(1000), read_at=time.monotonic(), changed_at=now)
    assert recent.asked == ["beyond", "unstamped"]
    assert all(entry.seen_on == NEW for entry in recent.entries.values())
    assert recent.entries["beyond"].offset == 1200


async def test_while_a_change_settles_new_writes_are_looked_up_not_stamped() -> None:
    recent = Looked()
    changed_at = time.monotonic()
    recent.remember("soon after", Written(noted=time.monotonic()))
    await recent.settle(promoted(1000), read_at=time.monotonic(), changed_at=changed_at)
    assert recent.asked == ["soon after"]
    later = Written(noted=changed_at + SETTLING_SECONDS + 1)
    recent.remember("later", later)
    await recent.settle(promoted(1000), read_at=later.noted + 1, changed_at=changed_at)
    assert recent.asked == ["soon after"]
    assert later.seen_on == NEW


async def test_an_entry_not_settled_is_looked_up_again_next_tick() -> None:
    recent = Looked(found=None)  # the answer came from another server
    recent.remember("x", Written(noted=time.monotonic(), seen_on=OLD, offset=5000))
    for _ in range(2):
        await recent.settle(promoted(1000), read_at=time.monotonic(), changed_at=0)
    assert recent.asked == ["x", "x"]


def test_the_record_is_bounded_in_count_and_time() -> None:
    recent = Looked(most=3, seconds=60)
    for n in range(5):
        recent.remember(f"k{n}", Written(noted=time.monotonic()))
    assert list(recent.entries) == ["k2", "k3", "k4"]
    assert recent.watching()
    recent.remember("old", Written(noted=time.monotonic() - 61))
    recent.entries.move_to_end("old", last=False)
    recent.watching()
    assert "old" not in recent.entries
    for key in list(recent.entries):
        recent.forget(key)
    assert not recent.watching()
    assert not recent.noted.is_set(), "the watch idles again"


async def test_with_nothing_to_fail_over_to_the_watch_stops_and_remembers_nothing(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = aioredis.Redis.from_url(redis_url)
    recent = Looked()
    watch = PrimaryWatch(client, [recent], sentinel=False, min_replicas=0)
    try:
        with caplog.at_level(logging.INFO, logger="runtime.failover.watch"):
            await watch.run()  # returns at once: one Redis, no replica
    finally:
        await client.aclose()
    recent.remember("x", Written(noted=time.monotonic()))
    assert recent.entries == {}
    assert caplog.records == [], "nothing to warn of: there is no replica to fail over to"
