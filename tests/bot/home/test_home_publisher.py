"""The one loop per web process that publishes Home tabs: a fan-out's marks cost no task, people
go out in the order marked, a debounce wait holds up no one behind, and a mark during a
publish is published again after. On real Redis, with the rate script the webs share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis

from bot.home.pace import PublishRate
from bot.home.publisher import SETTLE_SECONDS, TabPublisher
from runtime.db.connection import connect
from runtime.db.keys import Keys

DEBOUNCE = 0.5


@dataclass
class Published:
    """What went out: (person, when, `since` the reads began)."""

    tabs: list[tuple[str, float, float]] = field(default_factory=list)
    during: dict[str, list[str]] = field(default_factory=dict)
    """Person -> people marked while their tab is being published (a change meanwhile)."""
    publisher: TabPublisher | None = None
    _out: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, user_id: str, since: float) -> None:
        await asyncio.sleep(0.01)  # the reads and `views.publish`
        for person in self.during.pop(user_id, []):
            assert self.publisher is not None
            self.publisher.mark(person)
        self.tabs.append((user_id, time.monotonic(), since))
        self._out.set()

    def of(self, user_id: str) -> list[float]:
        return [at for person, at, _ in self.tabs if person == user_id]

    async def until(self, count: int, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.tabs) < count:
                self._out.clear()
                await self._out.wait()


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def running(
    redis: aioredis.Redis, prefix: str
) -> AsyncIterator[tuple[TabPublisher, Published]]:
    keys = Keys(prefix)
    published = Published()
    publisher = TabPublisher(
        redis=redis,
        keys=keys,
        publish=published,
        rate=PublishRate(redis=redis, keys=keys, per_minute=60_000),
        debounce_seconds=DEBOUNCE,
    )
    published.publisher = publisher
    loop = asyncio.get_running_loop().create_task(publisher.run())
    yield publisher, published
    publisher.stop()
    async with asyncio.timeout(2):
        await loop


async def test_a_fan_out_starts_no_task_and_publishes_each_person_once_in_order(
    running: tuple[TabPublisher, Published],
) -> None:
    publisher, published = running
    people = [f"U{n:03d}" for n in range(200)]
    tasks = len(asyncio.all_tasks())
    for person in people:
        publisher.mark(person)
        publisher.mark(person)  # a burst is one publish
    assert len(asyncio.all_tasks()) == tasks
    assert publisher.waiting() == len(people)
    await published.until(len(people))
    await asyncio.sleep(DEBOUNCE + SETTLE_SECONDS)  # nothing more goes out
    assert [person for person, _, _ in published.tabs] == people
    assert publisher.waiting() == 0


async def test_someone_marked_during_their_publish_is_published_again_after_the_debounce(
    running: tuple[TabPublisher, Published],
) -> None:
    publisher, published = running
    published.during["UALICE"] = ["UALICE", "UALICE"]
    publisher.mark("UALICE")
    await published.until(2)
    await asyncio.sleep(DEBOUNCE + SETTLE_SECONDS)
    first, second = published.of("UALICE")
    assert second - first >= DEBOUNCE - 0.05
    # What went out second was read after the mark that came during the first.
    assert published.tabs[1][2] > published.tabs[0][2] + SETTLE_SECONDS


async def test_a_person_waiting_out_their_debounce_holds_up_no_one_behind(
    running: tuple[TabPublisher, Published], redis: aioredis.Redis, prefix: str
) -> None:
    publisher, published = running
    # Another web process published UALICE's tab just now.
    await redis.set(Keys(prefix).home.published("UALICE"), "1", px=1000)
    marked = time.monotonic()
    publisher.mark("UALICE")
    publisher.mark("UBOB")
    await published.until(2)
    assert [person for person, _, _ in published.tabs] == ["UBOB", "UALICE"]
    assert published.of("UBOB")[0] - marked < 0.5
    assert published.of("UALICE")[0] - marked >= 0.9


async def test_stop_ends_the_loop_while_it_waits_for_the_rate(
    redis: aioredis.Redis, prefix: str
) -> None:
    keys = Keys(prefix)
    published = Published()
    publisher = TabPublisher(
        redis=redis,
        keys=keys,
        publish=published,
        rate=PublishRate(redis=redis, keys=keys, per_minute=1),  # one, then a minute's wait
        debounce_seconds=DEBOUNCE,
    )
    loop = asyncio.get_running_loop().create_task(publisher.run())
    publisher.mark("UALICE")
    publisher.mark("UBOB")
    await published.until(1)
    await asyncio.sleep(SETTLE_SECONDS)
    publisher.stop()
    async with asyncio.timeout(1):
        await loop
    assert [person for person, _, _ in published.tabs] == ["UALICE"]
