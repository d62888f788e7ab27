"""Who is in a channel, as the Home tab and its clicks ask it: every page, cached for every web
process, asked again after a change, and never guessed when Slack cannot say."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from bot.slack.channel_members import PAGE_SIZE, ChannelMembers, ChannelUnavailable
from bot.slack.client import CLICK_LOOKUP_SECONDS, directory_client
from bot.slack.directory import DirectoryUnavailable
from runtime.db.connection import connect
from runtime.db.keys import Keys
from tests.support.fake_slack import FakeSlack

LOOKUP = "conversations.members"
CROWD = [f"U{n:05d}" for n in range(450)]
"""#general: three pages of `PAGE_SIZE`."""


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    fake.channel_members["CGENERAL"] = list(CROWD)
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def channels(slack: FakeSlack, redis_url: str, prefix: str) -> AsyncIterator[ChannelMembers]:
    """Built as the web process builds the one its clicks ask."""
    redis = connect(redis_url)
    async with aiohttp.ClientSession() as session:
        client = directory_client(token="xoxb-test", base_url=slack.api_url, session=session)
        yield ChannelMembers(redis, Keys(prefix), client, lookup_seconds=CLICK_LOOKUP_SECONDS)
    await redis.aclose()


async def test_every_page_is_read_once_then_the_members_are_cached(
    slack: FakeSlack, channels: ChannelMembers
) -> None:
    assert await channels.members("CGENERAL") == frozenset(CROWD)
    pages = slack.calls_to(LOOKUP)
    assert [int(c.args["limit"]) for c in pages] == [PAGE_SIZE] * 3
    assert [c.args.get("cursor") for c in pages] == [None, "200", "400"]
    found = await asyncio.gather(*(channels.members("CGENERAL") for _ in range(10)))
    assert found == [frozenset(CROWD)] * 10
    assert len(slack.calls_to(LOOKUP)) == 3, "the others found them cached"


async def test_concurrent_lookups_of_a_channel_share_one_request(
    slack: FakeSlack, channels: ChannelMembers
) -> None:
    slack.channel_members["COPS"] = ["UDAVE"]
    slack.slow_down(LOOKUP, seconds=0.3)  # all ten wait at once
    found = await asyncio.gather(*(channels.members("COPS") for _ in range(10)))
    assert found == [frozenset({"UDAVE"})] * 10
    assert len(slack.calls_to(LOOKUP)) == 1


async def test_a_change_during_a_lookup_leaves_nothing_stale(
    slack: FakeSlack, channels: ChannelMembers
) -> None:
    slack.channel_members["COPS"] = ["UDAVE"]
    slack.slow_down(LOOKUP, seconds=30)
    lookup = asyncio.get_running_loop().create_task(channels.members("COPS"))
    await slack.wait_for(lambda: slack.waiting.get(LOOKUP), what="Slack answering the lookup")
    slack.channel_members["COPS"] = ["UDAVE", "UERIN"]
    await channels.forget("COPS")  # member_joined_channel arrives meanwhile
    slack.speed_up(LOOKUP)
    assert await lookup == frozenset({"UDAVE"}), "the question in flight gets what Slack said"
    assert await channels.members("COPS") == frozenset({"UDAVE", "UERIN"})


@pytest.mark.parametrize(
    ("status", "error", "headers"),
    [
        (200, "not_in_channel", {}),
        (200, "channel_not_found", {}),
        (429, "ratelimited", {"Retry-After": "5"}),
    ],
    ids=["not in channel", "not found", "rate limited"],
)
async def test_when_slack_cannot_say_nothing_is_guessed_or_cached(
    slack: FakeSlack,
    channels: ChannelMembers,
    status: int,
    error: str,
    headers: dict[str, str],
) -> None:
    slack.fail_next(LOOKUP, status, {"ok": False, "error": error}, headers=headers)
    started = time.monotonic()
    with pytest.raises(ChannelUnavailable):
        await channels.members("CGENERAL")
    assert time.monotonic() - started < CLICK_LOOKUP_SECONDS + 0.5, "a click's bound"
    assert await channels.members("CGENERAL") == frozenset(CROWD), "asked again, not cached"


async def test_a_page_that_fails_fails_the_whole_lookup(
    slack: FakeSlack, channels: ChannelMembers
) -> None:
    """A channel read in part would leave out people who may decide, or worse, think a partial
    list is the whole channel: all pages or nothing."""
    slack.fail_next(
        LOOKUP, 200, {"ok": False, "error": "internal_error"}, when=lambda a: "cursor" in a
    )
    with pytest.raises(DirectoryUnavailable):
        await channels.members("CGENERAL")
    assert await channels.members("CGENERAL") == frozenset(CROWD)


async def test_the_first_channel_a_person_is_in_and_failing_closed(
    slack: FakeSlack, channels: ChannelMembers
) -> None:
    slack.channel_members["COPS"] = ["UDAVE"]
    assert await channels.channel_with("UDAVE", ["CGENERAL", "COPS"]) == "COPS"
    assert await channels.channel_with("UNOBODY", ["CGENERAL", "COPS"]) is None
    # Slack does not answer for #secret: dave is still found in #ops, nobody else is guessed.
    assert await channels.channel_with("UDAVE", ["CSECRET", "COPS"]) == "COPS"
    with pytest.raises(ChannelUnavailable):
        await channels.channel_with("UNOBODY", ["CSECRET", "COPS"])
