"""How fast the web processes publish Home tabs, together: Slack's rate for `views.publish`.

`views.publish` is a Tier 4 method (100+ a minute per workspace, short bursts tolerated). A
change that concerns a 200-person group would otherwise publish 200 tabs at once, from every web
process. One bucket in Redis (`lua/publish_rate.lua`) serves them all: `HOME_PUBLISHES_PER_MINUTE`
a minute, up to `BURST_SECONDS` of them at once. A 429 from Slack anyway (another app sharing the
token, a lower limit than we think) closes the bucket for its Retry-After, for every web process;
the tab it was for stays to be published (`bot.home.publisher`), with what it shows read again
when it goes out. A publish asks the bucket once: a token due within `AHEAD_SECONDS` is taken at
once, for then. Nothing else waits on it: clicks neither take a token nor share the tab's
connections.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final

import redis.asyncio as aioredis

from runtime.db import Key, Keys, Registered, ScriptCall, declare

PUBLISHES_PER_MINUTE: Final = 100
"""Slack's Tier 4 floor."""
BURST_SECONDS: Final = 10.0
"""How many seconds' worth of publishes may go out at once."""
MAX_NAP_SECONDS: Final = 5.0
"""Asked again at least this often while waiting (the bucket may be refilled by a setting
change, or Slack's pause lifted)."""
AHEAD_SECONDS: Final = 2.0
"""A token due within this long is taken at once, for then (one call of the script per publish
while paced). A 429 from Slack meanwhile does not take it back: another web's publish already
reserved may go out during the pause, and is paused again by its own 429 (at most one per web,
each publishing one tab at a time)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeToken(ScriptCall):
    """`bot/home/lua/publish_rate.lua`."""

    rate: Key
    pause: Key
    interval_ms: int
    burst: int
    ahead_ms: int


_SCRIPT = declare(TakeToken, "bot.home", "publish_rate")


@dataclass(kw_only=True)
class PublishRate:
    redis: aioredis.Redis
    keys: Keys
    per_minute: int = PUBLISHES_PER_MINUTE
    _script: Any = field(init=False)

    def __post_init__(self) -> None:
        self._script = Registered(self.redis, _SCRIPT)

    @property
    def _interval_ms(self) -> int:
        return max(1, round(60_000 / self.per_minute))

    @property
    def _burst(self) -> int:
        return max(1, round(self.per_minute * BURST_SECONDS / 60))

    async def wait_for_turn(self) -> None:
        """Once one more publish may go out (a token taken)."""
        while True:
            taken, wait_ms = await self._script(
                TakeToken(
                    rate=self.keys.home.publish_rate,
                    pause=self.keys.home.publish_pause,
                    interval_ms=self._interval_ms,
                    burst=self._burst,
                    ahead_ms=int(AHEAD_SECONDS * 1000),
                )
            )
            if int(taken):
                if int(wait_ms) > 0:
                    await asyncio.sleep(int(wait_ms) / 1000)
                return
            await asyncio.sleep(min(int(wait_ms) / 1000, MAX_NAP_SECONDS))

    async def pause(self, seconds: float) -> None:
        """Slack answered 429: no web process publishes for `seconds` (its Retry-After)."""
        await self.redis.set(self.keys.home.publish_pause, "1", px=max(1, int(seconds * 1000)))
