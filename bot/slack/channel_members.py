"""Who is in a channel: for calls that anyone in their channel may decide, seen from the Home tab.

On the card, being in the channel is proven by the click itself (Slack sends it from there); the
Home tab has no channel, so who is in one comes from `conversations.members`, page by page,
cached for every web process by `bot.slack.member_cache` for `MEMBERS_TTL_SECONDS` and
forgotten when Slack sends `member_joined_channel` or `member_left_channel`
(`bot.listeners.workspace`). Slack sends those only for channels the app is in: a public
channel it posts in without having joined is kept fresh by the TTL alone.

Fail closed: when Slack cannot say (an error such as `not_in_channel` or `channel_not_found`, a
429 after the client's retries, no answer within `lookup_seconds`, more members than
`MAX_PAGES` pages), `ChannelUnavailable` (a `DirectoryUnavailable`) is raised, and the call is
neither listed nor decided from the Home tab for that channel. A click that finds nothing cached
asks within its own bound (`CLICK_LOOKUP_SECONDS`); the tab republished after it asks without
one, so that a retry a few seconds later finds even a large channel cached.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import redis.asyncio as aioredis
from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.member_cache import DirectoryUnavailable, MemberCache
from runtime.db import Keys

log = logging.getLogger(__name__)

MEMBERS_TTL_SECONDS = 300
PAGE_SIZE = 200
"""Members per page of `conversations.members` (Slack advises at most 200)."""
MAX_PAGES = 100
"""A channel of more than 20,000 members is not read at all: nobody is listed for it, rather
than a request that never ends."""


class ChannelUnavailable(DirectoryUnavailable):
    """Slack could not tell us who is in a channel."""


class ChannelMembers:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        client: AsyncWebClient,
        *,
        lookup_seconds: float | None = None,
    ) -> None:
        """`lookup_seconds` bounds each lookup, all its pages (None: the client's timeout per
        page)."""
        self._client = client
        self._lookup_seconds = lookup_seconds
        self._cache = MemberCache(
            redis=redis,
            members_key=keys.slack.channel_members,
            generation_key=keys.slack.channel_generation,
            ask=self._ask_slack,
            ttl_seconds=MEMBERS_TTL_SECONDS,
            unavailable=ChannelUnavailable,
        )

    async def members(self, channel: str) -> frozenset[str]:
        """Everyone in `channel`; raises `ChannelUnavailable` when Slack cannot say."""
        return await self._cache.members(channel)

    async def channel_with(
        self,
        user_id: str,
        channels: Sequence[str],
        seen: dict[str, frozenset[str] | None] | None = None,
    ) -> str | None:
        """The first of `channels` that `user_id` is in; None when Slack says they are in none.
        Raises `ChannelUnavailable` when they are in none that Slack answered for and it did not
        answer for another: that one might have them. `seen`: the members found so far (None:
        Slack could not say), shared by the caller's questions so each channel is asked once."""
        seen = {} if seen is None else seen
        unanswered: str | None = None
        for channel in dict.fromkeys(channels):
            if channel not in seen:
                try:
                    seen[channel] = await self.members(channel)
                except DirectoryUnavailable:
                    seen[channel] = None
            found = seen[channel]
            if found is None:
                unanswered = channel
            elif user_id in found:
                return channel
        if unanswered is not None:
            raise ChannelUnavailable(unanswered)
        return None

    async def forget(self, channel: str) -> None:
        """Someone joined or left: ask Slack again next time."""
        await self._cache.forget(channel)

    async def _ask_slack(self, channel: str) -> frozenset[str]:
        found: set[str] = set()
        cursor: str | None = None
        try:
            async with asyncio.timeout(self._lookup_seconds):
                for _ in range(MAX_PAGES):
                    page = await self._client.conversations_members(
                        channel=channel, limit=PAGE_SIZE, cursor=cursor
                    )
                    found.update(m for m in page.get("members") or [] if isinstance(m, str))
                    cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                    if cursor is None:
                        return frozenset(found)
        except SlackApiError as error:
            log.warning("members of %s unavailable: %s", channel, error.response.get("error"))
            raise ChannelUnavailable(channel) from error
        except (ClientError, TimeoutError) as error:
            log.warning("members of %s unavailable: %s", channel, type(error).__name__)
            raise ChannelUnavailable(channel) from error
        log.warning("members of %s not read: more than %d", channel, MAX_PAGES * PAGE_SIZE)
        raise ChannelUnavailable(channel)
