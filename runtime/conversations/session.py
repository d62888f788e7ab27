"""A thread's history through the SDK's `Session` protocol, on the project's own Redis client.

The SDK ships a Redis session (`agents.extensions.memory.RedisSession`), but it keeps three keys
per session under a prefix of its own, updates them in `WATCH`/`MULTI` transactions that a
cluster client does not run, and has no cap on the items. This one is one list per thread in the
thread's shard (`Keys.conversation`, tagged for Redis Cluster), written by one script that
appends, keeps the newest `max_items` and starts the time to live again; it goes through the
client every process already has, with its TLS settings. The history is ours, in Redis, so a
reply works with any model provider and never needs a provider's stored responses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import redis.asyncio as aioredis
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from runtime.db.keys import Keys
from runtime.db.lua import Key, MoreArgs, Registered, ScriptCall, declare

if TYPE_CHECKING:
    from agents.items import TResponseInputItem


@dataclass(frozen=True, slots=True, kw_only=True)
class AddItems(ScriptCall):
    """`runtime/conversations/lua/add_items.lua`."""

    conversation: Key
    ttl_seconds: int
    most: int
    items: MoreArgs


ADD_ITEMS_SCRIPT = declare(AddItems, "runtime.conversations", "add_items")


def conversation_id(channel: str, thread: str) -> str:
    """A thread's id: its channel and its root message's timestamp (unique per workspace)."""
    return f"{channel}:{thread}"


@dataclass(kw_only=True)
class ThreadSession:
    """The SDK's `Session` for one thread: every run in the thread reads and extends it."""

    redis: aioredis.Redis
    keys: Keys
    session_id: str
    """`conversation_id(channel, thread)`."""
    ttl_seconds: int
    max_items: int
    session_settings: SessionSettings | None = None
    _key: str = field(init=False)

    def __post_init__(self) -> None:
        self._key = self.keys.conversation(self.session_id)
        self._add = Registered(self.redis, ADD_ITEMS_SCRIPT)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest `limit` items (all without one), oldest first."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        start = -limit if limit is not None else 0
        raw = await self.redis.lrange(self._key, start, -1)
        return [_item(entry) for entry in raw]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        # Only the newest can be kept: older ones would be trimmed by the same script anyway.
        kept = items[-self.max_items :]
        payloads = [json.dumps(item, separators=(",", ":")) for item in kept]
        await self._add(
            AddItems(
                conversation=self._key,
                ttl_seconds=self.ttl_seconds,
                most=self.max_items,
                items=payloads,
            )
        )

    async def pop_item(self) -> TResponseInputItem | None:
        raw = await self.redis.rpop(self._key)
        # RPOP without a count answers one item, never a list.
        return _item(cast("bytes | str", raw)) if raw is not None else None

    async def clear_session(self) -> None:
        await self.redis.delete(self._key)


def _item(raw: bytes | str) -> TResponseInputItem:
    return cast("TResponseInputItem", json.loads(raw))
