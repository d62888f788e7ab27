"""Who is in something Slack lists members of (a user group, a channel), cached in Redis for every
web process, briefly, and forgotten when Slack says it changed.

One cache per kind, each with its Redis keys and its question to Slack (`ask`). Concurrent
lookups of one id in a process share one request (a burst of clicks on a card whose cache just
expired must not become a burst of calls, nor of 429s), and a lookup that began before a
`forget` never caches what it found: a generation counter per id, compared in Redis as the
answer is stored (`store_members.lua`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from runtime.db import Key, Registered, ScriptCall, declare

log = logging.getLogger(__name__)

GENERATION_TTL_SECONDS = 86400
"""A change counter lapses a day after the last change: only a lookup begun before that change
and still running when the counter lapses could then cache an old answer, and lookups take
seconds. (Channels change often; their counters must not pile up.)"""

# Caches an id's members unless it changed while Slack was asked.


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreMembers(ScriptCall):
    """`bot/slack/lua/store_members.lua`."""

    generation: Key
    members: Key
    generation_read: bytes | str
    found: str
    ttl_seconds: int


_STORE_IF_UNCHANGED = declare(StoreMembers, "bot.slack", "store_members")


class DirectoryUnavailable(Exception):
    """Slack could not say who is in a group or a channel; deciding must wait (also known as
    `bot.slack.directory.DirectoryUnavailable`)."""


@dataclass(kw_only=True)
class MemberCache:
    redis: aioredis.Redis
    members_key: Callable[[str], str]
    """The cached members' key (a JSON list, with a TTL) of an id."""
    generation_key: Callable[[str], str]
    """The key counting an id's changes; in the members' slot (one script writes both)."""
    ask: Callable[[str], Awaitable[frozenset[str]]]
    """Slack's answer for an id; raises a `DirectoryUnavailable` when it has none."""
    ttl_seconds: int
    unavailable: type[DirectoryUnavailable] = DirectoryUnavailable
    """What a lookup that could not finish (cancelled) raises in those who shared it."""
    _lookups: dict[str, asyncio.Future[frozenset[str]]] = field(default_factory=dict)
    """Lookups in flight in this process, by id."""

    def __post_init__(self) -> None:
        self._store = Registered(self.redis, _STORE_IF_UNCHANGED)

    async def members(self, of: str) -> frozenset[str]:
        cached, generation = await self.redis.mget(self.members_key(of), self.generation_key(of))
        if cached is not None:
            return frozenset(json.loads(cached))
        return await self._lookup(of, generation)

    async def warm(self, of: str) -> None:
        """Ask Slack now, so that the next question finds it cached; a failure is only logged."""
        generation = await self.redis.get(self.generation_key(of))
        try:
            await self._lookup(of, generation)
        except DirectoryUnavailable:
            log.info("members of %s not cached ahead of the clicks", of)

    async def forget(self, of: str) -> None:
        """Slack says it changed: ask again next time, and cache nothing asked before."""
        # A lookup already in flight here may have its answer from before the change.
        self._lookups.pop(of, None)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(self.generation_key(of))
            pipe.expire(self.generation_key(of), GENERATION_TTL_SECONDS)
            pipe.delete(self.members_key(of))
            await pipe.execute()

    async def _lookup(self, of: str, generation: bytes | str | None) -> frozenset[str]:
        """Slack's answer, cached unless `of` changed since `generation` was read."""
        pending = self._lookups.get(of)
        if pending is not None:
            # Shielded: a click that gives up must not cancel the others' lookup.
            return await asyncio.shield(pending)
        pending = asyncio.get_running_loop().create_future()
        self._lookups[of] = pending
        try:
            found = await self.ask(of)
            await self._store(
                StoreMembers(
                    generation=self.generation_key(of),
                    members=self.members_key(of),
                    generation_read=generation or b"0",
                    found=json.dumps(sorted(found)),
                    ttl_seconds=self.ttl_seconds,
                )
            )
            pending.set_result(found)
            return found
        except BaseException as error:
            # Those waiting get the same answer (cancelled: Slack could not answer).
            shared = error if isinstance(error, Exception) else self.unavailable(of)
            pending.set_exception(shared)
            pending.exception()  # retrieved: with nobody else waiting, nothing to report
            raise
        finally:
            if self._lookups.get(of) is pending:
                del self._lookups[of]
