"""Who may decide: Slack users and user groups, with group members and names cached in Redis.

Group membership comes from `usergroups.users.list`, cached briefly and dropped when Slack sends
`subteam_members_changed`; names (for messages that tell people who may decide) from
`users.info` and `usergroups.list`, cached longer (and kept a while in the process's memory:
`bot.slack.memo`).

A click waits on these lookups while Slack waits for its acknowledgement (3 s), so the web
process builds its directory with `lookup_seconds` and a client that never waits out a 429
(`bot.slack.client.directory_client`); a directory that cannot answer in time raises
`DirectoryUnavailable` and the click is refused politely. To keep clicks off Slack altogether,
the worker looks a card's groups up as it posts it (`warm`). The cache is
`bot.slack.member_cache`'s, as for the members of channels (`bot.slack.channel_members`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.member_cache import DirectoryUnavailable, MemberCache
from bot.slack.memo import Memo
from runtime.db import Keys
from runtime.deciders import is_group

__all__ = ["ApproverDirectory", "DirectoryUnavailable"]

log = logging.getLogger(__name__)

MEMBERS_TTL_SECONDS = 300
NAMES_TTL_SECONDS = 3600
NAMES_MEMO_SECONDS = 300
"""How long a process shows a name it found without reading it again (names are only shown)."""


class ApproverDirectory:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        client: AsyncWebClient,
        *,
        lookup_seconds: float | None = None,
    ) -> None:
        """`lookup_seconds` bounds each question to Slack (None: the client's own timeout)."""
        self._redis = redis
        self._keys = keys
        self._client = client
        self._lookup_seconds = lookup_seconds
        self._names: Memo[str] = Memo(NAMES_MEMO_SECONDS)
        """Names (people, groups, channels) this process found, Slack's or Redis's."""
        self._groups = MemberCache(
            redis=redis,
            members_key=keys.slack.group_members,
            generation_key=keys.slack.group_generation,
            ask=self._ask_slack,
            ttl_seconds=MEMBERS_TTL_SECONDS,
        )

    async def members(self, group_id: str) -> set[str]:
        return set(await self._groups.members(group_id))

    async def warm(self, approvers: Sequence[str]) -> None:
        """Ask Slack now who is in each group among `approvers`, so that clicks find it cached.

        A group Slack will not answer for is only logged: the clicks will ask again.
        """
        for group_id in (p for p in approvers if is_group(p)):
            await self._groups.warm(group_id)

    async def forget_group(self, group_id: str) -> None:
        """Slack says the group changed: ask again next time, and cache nothing asked before."""
        await self._groups.forget(group_id)

    async def _ask_slack(self, group_id: str) -> frozenset[str]:
        try:
            async with asyncio.timeout(self._lookup_seconds):
                response = await self._client.usergroups_users_list(usergroup=group_id)
        except (SlackApiError, ClientError, TimeoutError) as error:
            log.warning("members of %s unavailable: %s", group_id, type(error).__name__)
            raise DirectoryUnavailable(group_id) from error
        return frozenset(u for u in response.get("users") or [] if isinstance(u, str))

    async def names(self, principals: Sequence[str]) -> dict[str, str]:
        """A readable name per principal (`@handle` for groups); the id if Slack won't say."""
        names = await asyncio.gather(*(self._name(principal) for principal in principals))
        return dict(zip(principals, names, strict=True))

    async def _name(self, principal: str) -> str:
        if (known := self._names.get(principal)) is not None:
            return known
        key = self._keys.slack.display_name(principal)
        cached: Any = await self._redis.get(key)
        if cached is not None:
            self._names.put(principal, str(cached.decode()))
            return str(cached.decode())
        try:
            async with asyncio.timeout(self._lookup_seconds):
                name = await (
                    self._group_handle(principal)
                    if is_group(principal)
                    else self._user_name(principal)
                )
        except (SlackApiError, ClientError, TimeoutError):
            return principal
        await self._redis.set(key, name, ex=NAMES_TTL_SECONDS)
        self._names.put(principal, name)
        return name

    async def _user_name(self, user_id: str) -> str:
        response = await self._client.users_info(user=user_id)
        user = response.get("user") or {}
        profile = user.get("profile") or {}
        return str(
            profile.get("display_name") or profile.get("real_name") or user.get("name") or user_id
        )

    async def _group_handle(self, group_id: str) -> str:
        response = await self._client.usergroups_list()
        for group in response.get("usergroups") or []:
            if group.get("id") == group_id:
                return f"@{group.get('handle') or group.get('name') or group_id}"
        return group_id

    async def channel_name(self, channel_id: str) -> str | None:
        """A channel's name without the `#` (cached like names); None if Slack won't say."""
        if (known := self._names.get(channel_id)) is not None:
            return known or None  # "": Slack answered, with no name (a direct message)
        key = self._keys.slack.display_name(channel_id)
        cached: Any = await self._redis.get(key)
        if cached is not None:
            self._names.put(channel_id, str(cached.decode()))
            return str(cached.decode())
        try:
            response = await self._client.conversations_info(channel=channel_id)
        except SlackApiError as error:
            if error.response.get("error") == "channel_not_found":
                self._names.put(channel_id, "")  # not one the app can see: asked again later
            return None
        except (ClientError, TimeoutError):
            return None
        name = (response.get("channel") or {}).get("name")
        if not isinstance(name, str) or not name:
            self._names.put(channel_id, "")
            return None
        await self._redis.set(key, name, ex=NAMES_TTL_SECONDS)
        self._names.put(channel_id, name)
        return name
