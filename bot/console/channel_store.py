"""The console's channel, kept in Redis beside the runs, so restarting the demo strands nothing.

The stand-in Slack lives in the web process's memory, while a waiting run lives in Redis: without
this, a restarted demo would show an empty channel while runs still wait on cards nobody can see.
The channel (messages and private notes; not open modals) is saved after every change and read
back at start. A card that is missing all the same is posted again by the reporter the first
time a worker redraws it (`SlackReporter.redraw` on `message_not_found`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import asdict, dataclass, fields
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.console.local_slack import LocalSlack, Message, Note

log = logging.getLogger(__name__)

KEEP_SECONDS = 8 * 24 * 3600
"""As long as an ended run's tombstone: a channel untouched that long is forgotten."""
SAVED_VERSION = 1


@dataclass(kw_only=True)
class ChannelStore:
    redis: aioredis.Redis
    key: str
    slack: LocalSlack

    async def restore(self) -> int:
        """Read the saved channel into the stand-in Slack; return how many messages came back."""
        try:
            raw = await self.redis.get(self.key)
        except RedisError:
            log.warning("console: Redis unreachable; the channel starts empty")
            return 0
        if raw is None:
            return 0
        try:
            saved = json.loads(raw)
            if saved.get("version") != SAVED_VERSION:
                raise ValueError(f"saved by another version ({saved.get('version')!r})")
            messages = [Message(**_known(Message, m)) for m in saved["messages"]]
            notes = [Note(**_known(Note, n)) for n in saved["notes"]]
        except (ValueError, TypeError, KeyError) as error:
            log.warning("console: the saved channel cannot be read (%s); it starts empty", error)
            return 0
        self.slack.restore(messages, notes)
        return len(messages)

    async def save(self) -> None:
        snapshot = {
            "version": SAVED_VERSION,
            "messages": [asdict(m) for m in self.slack.messages.values()],
            "notes": [asdict(n) for n in self.slack.private_notes],
        }
        await self.redis.set(self.key, json.dumps(snapshot), ex=KEEP_SECONDS)

    async def keep_saved(self) -> None:
        """Save after every change until the console closes (then once more)."""
        saved = -1
        while not self.slack.closing.is_set():
            if self.slack.version != saved:
                version = self.slack.version
                try:
                    await self.save()
                    saved = version
                except RedisError:
                    log.warning("console: channel not saved (Redis unreachable); trying again")
                    await asyncio.sleep(1.0)
                    continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(30):
                    await self.slack.wait_for_change(saved)
        with contextlib.suppress(RedisError):
            await self.save()


def _known(kind: type[Any], values: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in values.items() if k in names}
