"""The app's Home tab, per person: the approvals they may decide, in any channel, and their runs.

Published (`views.publish`) when the person opens the tab, and again when something changes for
them (`bot.home.watch`), at most once per `DEBOUNCE_SECONDS` per person across web processes: a
short-lived Redis key says a tab was just published, and a change meanwhile publishes once more
when it lapses.

"May decide" is the decision script's rule read from each open call's gate: listed by id or in
a listed user group, and not the requester (unless self-approval is allowed). A call that anyone
in its channel may decide is listed for the members of its channel or of a copy's
(`bot.slack.channel_members`), and for someone outside the workspace only where the call lets
such people decide; when Slack cannot say, it is not listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from aiohttp import ClientError
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.home.blocks import WAITING_SHOWN, OwnRun, WaitingCall, home_view
from bot.home.shared import SharedRead
from bot.slack.channel_members import ChannelMembers
from bot.slack.directory import ApproverDirectory, DirectoryUnavailable
from bot.slack.links import ThreadLinks
from bot.slack.members import StandingUnknown, WorkspaceMembers
from runtime.db import Keys
from runtime.decisions import CallView, DecisionRecorder
from runtime.process import TaskSet
from runtime.record import CallGate, deciders, needs_groups
from runtime.reporter import RunView
from runtime.runs import LiveRun, LiveRuns
from runtime.waiting import OpenApproval, OpenApprovals

log = logging.getLogger(__name__)

DEBOUNCE_SECONDS = 2.0
SETTLE_SECONDS = 0.2
"""A change waits this long before its publish, so that a burst (a decision, then the resume)
is one publish."""
PUBLISHES_AT_ONCE = 1
"""Tabs one web process reads and publishes at a time: a fan-out to 200 people otherwise takes
the Redis pool and the event loop from the clicks, whose acknowledgement Slack wants in 3 s
(`bench/home_fanout.py`, 1 web: click p99 204 ms with four at a time, 20 to 87 ms with one)."""
VIEWER_DAYS = 30
"""People who opened the tab within this many days get it republished on changes."""
VIEWERS_RELOAD_SECONDS = 600.0
"""How often a web process reads again who the viewers are. Each process knows at once who
opened the tab through it, and every process follows every change: the one a person opened
their tab through republishes it, the others learn of them within this long."""


@dataclass(kw_only=True)
class HomeTab:
    redis: aioredis.Redis
    keys: Keys
    client: AsyncWebClient
    directory: ApproverDirectory
    recorder: DecisionRecorder
    approvals: OpenApprovals
    live: LiveRuns
    links: ThreadLinks
    tasks: TaskSet
    channels: ChannelMembers
    members: WorkspaceMembers
    debounce_seconds: float = DEBOUNCE_SECONDS
    _dirty: dict[str, bool] = field(default_factory=dict)
    """Per person with a publish under way: whether something changed since it read."""
    _viewers: dict[str, float] = field(default_factory=dict)
    """Viewer -> when they last opened the tab (epoch s), as this process knows it."""
    _viewers_read_at: float | None = None
    _opened: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when someone opens their tab through this process."""
    _asked: dict[str, float] = field(default_factory=dict)
    """Per person: when (`time.monotonic()`) their tab was last asked for; what it shows is read
    after that."""
    _open: SharedRead[list[OpenApproval]] = field(init=False)
    _runs: SharedRead[list[LiveRun]] = field(init=False)
    _publishing: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(PUBLISHES_AT_ONCE)
    )
    _views_of: list[OpenApproval] | None = None
    _views: dict[tuple[str, str], asyncio.Future[CallView]] = field(default_factory=dict)
    """The calls read for the tabs drawn from `_views_of` (one read of the open approvals), so
    that a call shown on 200 tabs is read once."""

    def __post_init__(self) -> None:
        self._open = SharedRead(self.approvals.all)
        self._runs = SharedRead(self.live.every)

    async def opened(self, user_id: str) -> None:
        """The person opened the tab: remember them as a viewer and show it fresh."""
        now = time.time()
        self._viewers[user_id] = now
        self._opened.set()
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zadd(self.keys.home_viewers, {user_id: now})
                pipe.zremrangebyscore(self.keys.home_viewers, 0, now - VIEWER_DAYS * 86400)
                await pipe.execute()
        except RedisError:
            log.warning("home tab of %s: viewer not recorded", user_id)
        self.refresh(user_id)

    async def viewers(self, people: set[str]) -> set[str]:
        """Those of `people` who opened the tab recently, through any web process (the one that
        republishes a change's tabs does it for all): one ZMSCORE."""
        since = time.time() - VIEWER_DAYS * 86400
        asked = sorted(people)
        if not asked:
            return set()
        scores: Any = await self.redis.zmscore(self.keys.home_viewers, asked)
        for person, score in zip(asked, scores, strict=True):
            if score is not None:
                self._viewers[person] = max(self._viewers.get(person, 0.0), float(score))
        return {p for p in asked if self._viewers.get(p, 0.0) >= since}

    async def any_viewers(self) -> bool:
        """Whether anyone opened the tab recently: if not, no change needs looking into.
        Read from Redis at most every `VIEWERS_RELOAD_SECONDS`; one ZRANGEBYSCORE."""
        clock = time.monotonic()
        if self._viewers_read_at is None or clock - self._viewers_read_at > VIEWERS_RELOAD_SECONDS:
            since = time.time() - VIEWER_DAYS * 86400
            rows: Any = await self.redis.zrangebyscore(
                self.keys.home_viewers, since, "+inf", withscores=True
            )
            self._viewers_read_at = clock
            for member, score in rows:
                person = member.decode() if isinstance(member, bytes) else str(member)
                self._viewers[person] = max(self._viewers.get(person, 0.0), float(score))
        since = time.time() - VIEWER_DAYS * 86400
        return any(at >= since for at in self._viewers.values())

    def forget_openings(self) -> None:
        """Start looking out for the next opening (`opening`)."""
        self._opened.clear()

    async def opening(self) -> None:
        """Until someone opens their tab through this process (since `forget_openings`), or
        `VIEWERS_RELOAD_SECONDS` passed (someone may have opened it through another one)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(VIEWERS_RELOAD_SECONDS):
                await self._opened.wait()

    def refresh(self, user_id: str) -> None:
        """Publish the person's tab soon (debounced)."""
        self._asked[user_id] = time.monotonic()
        if user_id in self._dirty:
            self._dirty[user_id] = True
            return
        self._dirty[user_id] = True
        self.tasks.spawn(self._publisher(user_id), name=f"home:{user_id}")

    async def _publisher(self, user_id: str) -> None:
        try:
            await asyncio.sleep(SETTLE_SECONDS)
            while self._dirty.get(user_id):
                wait = await self._turn(user_id)
                if wait > 0:
                    await asyncio.sleep(wait)
                    continue
                async with self._publishing:
                    self._dirty[user_id] = False
                    await self.publish(user_id, since=self._asked.get(user_id))
        except (RedisError, SlackApiError, ClientError, TimeoutError, DirectoryUnavailable):
            log.warning("home tab of %s not published", user_id, exc_info=True)
        finally:
            self._dirty.pop(user_id, None)

    async def _turn(self, user_id: str) -> float:
        """0 when this process may publish now, else how long until it may."""
        key = self.keys.home_published(user_id)
        if await self.redis.set(key, "1", nx=True, px=int(self.debounce_seconds * 1000)):
            return 0.0
        remaining = await self.redis.pttl(key)
        return max(remaining, 50) / 1000

    async def publish(self, user_id: str, *, since: float | None = None) -> None:
        """Read what the tab shows (from reads begun at or after `since`, `time.monotonic()`;
        now if None) and publish it."""
        since = time.monotonic() if since is None else since
        waiting, more = await self.waiting_for(user_id, since=since)
        runs = [
            OwnRun(run=run, link=await self.links.thread(run.channel, run.thread))
            for run in await self._runs.since(since)
            if run.requester == user_id
        ]
        view = home_view(waiting, runs, more_waiting=more)
        await self.client.views_publish(user_id=user_id, view=view)

    async def waiting_for(
        self, user_id: str, *, since: float | None = None
    ) -> tuple[list[WaitingCall], int]:
        """The open approvals `user_id` may decide, newest first (as many as the tab shows),
        and how many more there are."""
        since = time.monotonic() if since is None else since
        groups: dict[str, set[str] | None] = {}
        seen = _ChannelsSeen()
        snapshot = await self._open.since(since)
        mine = [
            a for a in snapshot if await self._may_decide(user_id, a.gate, groups, seen, a.copies)
        ]
        found: list[WaitingCall] = []
        for approval in mine[:WAITING_SHOWN]:
            view = await self._view(snapshot, approval)
            if view.envelope is None or view.call is None:
                continue
            run = RunView.of(view.envelope)
            link = await self.links.thread(run.conversation.channel, run.conversation.thread)
            found.append(WaitingCall(run=run, call=view.call, link=link))
        return found, max(0, len(mine) - WAITING_SHOWN)

    async def _view(self, snapshot: list[OpenApproval], approval: OpenApproval) -> CallView:
        if self._views_of is not snapshot:
            self._views_of, self._views = snapshot, {}
        key = (approval.run_id, approval.approval_id)
        if key not in self._views:
            reading = asyncio.ensure_future(self.recorder.view(*key))
            reading.add_done_callback(lambda done: self._unless_failed(key, done))
            self._views[key] = reading
        # Shielded: one publish giving up does not cancel the read the others wait for.
        return await asyncio.shield(self._views[key])

    def _unless_failed(self, key: tuple[str, str], reading: asyncio.Future[CallView]) -> None:
        failed = reading.cancelled() or reading.exception() is not None
        if failed and self._views.get(key) is reading:
            del self._views[key]

    async def _may_decide(
        self,
        user_id: str,
        gate: CallGate,
        groups: dict[str, set[str] | None],
        seen: _ChannelsSeen,
        copies: tuple[str, ...] = (),
    ) -> bool:
        """`groups`: the members of each group looked up so far (None: Slack cannot say), so
        that a tab looks each group up once however many calls name it; `seen` the same for
        channels. `copies`: the channels of the call's copies."""
        if gate.anyone:
            return await self._may_decide_in_channel(user_id, gate, seen, copies)
        member_of: list[str] = []
        # No lookup when being in every group would not do either (the requester).
        if needs_groups(gate, user_id) and deciders.may_decide(gate, user_id, gate.groups):
            for group in gate.groups:
                if group not in groups:
                    try:
                        groups[group] = await self.directory.members(group)
                    except DirectoryUnavailable:
                        groups[group] = None
                if user_id in (groups[group] or ()):
                    member_of.append(group)
                    break
        return deciders.may_decide(gate, user_id, member_of)

    async def _may_decide_in_channel(
        self, user_id: str, gate: CallGate, seen: _ChannelsSeen, copies: tuple[str, ...]
    ) -> bool:
        """A call anyone in its channel may decide: for the members of its channel or a copy's,
        not the requester (unless self-approval is allowed), not someone outside the workspace
        (unless the call lets such people decide); never when Slack cannot say."""
        if not deciders.may_decide(gate, user_id):
            return False  # the requester: no lookup would change that
        try:
            if await self.channels.channel_with(user_id, (gate.channel, *copies), seen.members):
                if seen.inside is None:
                    seen.inside = (await self.members.standing(user_id)).inside
                return deciders.may_decide(gate, user_id, outside=not seen.inside)
        except (DirectoryUnavailable, StandingUnknown):
            pass
        return False


@dataclass(kw_only=True, slots=True)
class _ChannelsSeen:
    """What one tab found out for its calls that anyone in a channel may decide."""

    members: dict[str, frozenset[str] | None] = field(default_factory=dict)
    """Each channel's members (None: Slack cannot say)."""
    inside: bool | None = None
    """Whether the tab's person is a member of the workspace (None: not asked yet)."""
