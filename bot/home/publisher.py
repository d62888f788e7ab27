"""Publishing Home tabs: one loop per web process, and the people whose tab changed, in line.

`mark` (`HomeTab.refresh`) only puts a person in line: no task, no Redis, so that a click that
changes 200 tabs costs the click nothing more. The loop, started and stopped with the web app
(`bot.home.routes.run_home_watch`), publishes them one at a time in the order marked: each
`SETTLE_SECONDS` after their first mark (a decision then the resume is one publish), once the
debounce shared by the web processes gives this one its turn, and at their shared rate
(`bot.home.pace`). A 429 pauses every web process and puts the person first in line again.
Someone marked while their tab is being published is published again after: what went out may
have been read before the change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from aiohttp import ClientError
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError, SlackObjectFormationError

from bot.home.pace import PublishRate
from bot.slack.directory import DirectoryUnavailable
from runtime.db import Keys
from runtime.process import Shutdown

log = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 2.0
SETTLE_SECONDS = 0.2
"""A change waits this long before its publish, so that a burst (a decision, then the resume)
is one publish."""
_GIVEN_UP = (
    RedisError,
    SlackApiError,
    SlackObjectFormationError,
    ClientError,
    TimeoutError,
    DirectoryUnavailable,
)
"""Failures that leave a tab as it was until the next change marks its person again."""


@dataclass(kw_only=True)
class TabPublisher:
    redis: aioredis.Redis
    keys: Keys
    publish: Callable[[str, float], Awaitable[None]]
    """Reads one person's tab, from reads begun at or after the given `time.monotonic()`, and
    publishes it."""
    rate: PublishRate | None = None
    """Paces the publishes of every web process; None: unpaced."""
    debounce_seconds: float = DEBOUNCE_SECONDS
    _due: dict[str, float] = field(default_factory=dict)
    """The people in line, in the order marked -> the earliest their publish may go out
    (`time.monotonic()`); a debounce wait moves the time, not the place."""
    _asked: dict[str, float] = field(default_factory=dict)
    """Per person: when their tab was last asked for; what it shows is read after that."""
    _marked: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: Shutdown = field(default_factory=Shutdown)

    def mark(self, user_id: str) -> None:
        """Publish the person's tab soon (debounced)."""
        now = time.monotonic()
        self._asked[user_id] = now
        self._due.setdefault(user_id, now + SETTLE_SECONDS)
        self._marked.set()

    def waiting(self) -> int:
        """How many people are in line."""
        return len(self._due)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        """Publish whoever is marked, until `stop`."""
        while not self._stopping.is_set():
            user_id = self._next()
            if user_id is None:
                await self._stopping.unless_stopped(self._until_due())
                continue
            try:
                await self._stopping.unless_stopped(self._publish_one(user_id))
            except _GIVEN_UP:
                log.warning("home tab of %s not published", user_id, exc_info=True)
            except Exception:
                # The loop serves every tab: one tab's failure must not stop the others'.
                log.exception("home tab of %s failed", user_id)

    def _next(self) -> str | None:
        """The first in line whose publish may go out now."""
        now = time.monotonic()
        return next((person for person, due in self._due.items() if due <= now), None)

    async def _until_due(self) -> None:
        """Until the first in line is due, or someone is marked."""
        self._marked.clear()
        soonest = min(self._due.values(), default=None)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(None if soonest is None else soonest - time.monotonic()):
                await self._marked.wait()

    async def _publish_one(self, user_id: str) -> None:
        try:
            wait = await self._turn(user_id)
            if wait > 0:
                self._due[user_id] = time.monotonic() + wait
                return
            if self.rate is not None:
                await self.rate.wait_for_turn()
        except Exception:
            self._due.pop(user_id, None)
            raise
        # Out of line before the reads: a mark from now on may not be in what goes out.
        self._due.pop(user_id, None)
        try:
            await self.publish(user_id, self._asked.get(user_id, time.monotonic()))
        except SlackApiError as error:
            if (pause := _retry_after(error)) is None or self.rate is None:
                raise
            log.info("home tabs: Slack asks for a %g s pause", pause)
            await self.rate.pause(pause)
            # First in line again, read afresh once Slack allows.
            self._due = {user_id: time.monotonic(), **self._due}

    async def _turn(self, user_id: str) -> float:
        """0 when this process may publish now, else how long until it may."""
        key = self.keys.home.published(user_id)
        if await self.redis.set(key, "1", nx=True, px=int(self.debounce_seconds * 1000)):
            return 0.0
        remaining = await self.redis.pttl(key)
        return max(remaining, 50) / 1000


def _retry_after(error: SlackApiError) -> float | None:
    """Seconds Slack asked to wait (a 429's Retry-After), None for another refusal."""
    if error.response.status_code != 429:
        return None
    headers = {name.lower(): value for name, value in (error.response.headers or {}).items()}
    try:
        return max(1.0, float(headers.get("retry-after", 1)))
    except (TypeError, ValueError):
        return 1.0
