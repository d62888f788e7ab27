"""The app's Home tab, per person: the approvals they may decide, in any channel, and their runs.

Published (`views.publish`) when the person opens the tab, and again when something changes for
them (`bot.home.watch`), at most once per `DEBOUNCE_SECONDS` per person across web processes: a
short-lived Redis key says a tab was just published, and a change meanwhile publishes once more
when it lapses.

What a tab lists is read by index (`runtime.waiting.index`), so that a publish, a tab opened
alone too, costs a number of Redis commands that does not grow with what waits: the person's own
set, the sets of the user groups with open calls they are in (`bot.slack.directory`) and of the
channels with calls anyone there may decide that they are in (`bot.slack.channel_members`),
`INDEX_DEPTH` newest of each, then only those calls.
A group's or channel's set and members, and each call, are read once for all the tabs of a
fan-out (`bot.home.shared`).
"Your runs" is read from the person's own set of live runs (`Shard.live_runs_of`). Calls a
worker of an earlier version opened have no index entries, and runs it started are not in their
requester's set: they show on their cards (and `/agent status`) and not here, the calls until
their run stops again (a rolling deploy's few minutes).

"May decide" is the decision script's rule read from each open call's gate: listed by id or in
a listed user group, and not the requester (unless self-approval is allowed). A call that anyone
in its channel may decide is listed for the members of its channel or of a copy's, and for
someone outside the workspace only where the call lets such people decide; when Slack cannot
say, it is not listed.
The decision script stays the judge of every click, whatever a tab listed.

Publishes go out one at a time from one loop per web process (`bot.home.publisher`), paced
across web processes (`bot.home.pace`), and read on a Redis pool of their own
(`bot.wiring.home_tab_redis`): clicks wait behind neither. A tab is drawn (CPU with no await
in it) only between the Slack requests its web process answers (`bot.slack.in_flight`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisError
from slack_sdk.web.async_client import AsyncWebClient

from bot.home.blocks import RUNS_SHOWN, WAITING_SHOWN, OwnRun, WaitingCall, home_view
from bot.home.pace import PublishRate
from bot.home.publisher import DEBOUNCE_SECONDS, TabPublisher
from bot.home.shared import SharedRead, SharedReads
from bot.slack.channel_members import ChannelMembers
from bot.slack.directory import ApproverDirectory, DirectoryUnavailable
from bot.slack.in_flight import InFlight
from bot.slack.links import ThreadLinks
from bot.slack.members import StandingUnknown, WorkspaceMembers
from runtime.db import Keys
from runtime.deciders import decides
from runtime.decisions import CallView, DecisionRecorder
from runtime.record import CallGate
from runtime.reporter import RunView
from runtime.runs import LiveRuns
from runtime.waiting import Listed, OpenApproval, WaitingIndex

log = logging.getLogger(__name__)

M = TypeVar("M")

INDEX_DEPTH = WAITING_SHOWN + 10
"""Calls read of each of a person's index sets (theirs, each group's, each channel's): what
the tab shows, and a margin for calls the person turns out not to decide (their own requests,
a quorum they approved towards), so that the read does not grow with what waits."""
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
    index: WaitingIndex
    live: LiveRuns
    links: ThreadLinks
    debounce_seconds: float = DEBOUNCE_SECONDS
    rate: PublishRate | None = None
    """Paces the publishes of every web process (`bot.home.pace`); None: unpaced."""
    channels: ChannelMembers
    """Who is in a channel: for calls anyone in it may decide, by the index's channel sets."""
    members: WorkspaceMembers
    """Who is outside the workspace: such a person is listed anyone-calls only where allowed."""
    in_flight: InFlight | None = None
    """The web's Slack requests in flight: a tab is drawn after them (`bot.slack.in_flight`)."""
    _viewers: dict[str, float] = field(default_factory=dict)
    """Viewer -> when they last opened the tab (epoch s), as this process knows it."""
    _viewers_read_at: float | None = None
    _opened: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when someone opens their tab through this process."""
    _groups: SharedRead[set[str]] = field(init=False)
    _channels: SharedRead[set[str]] = field(init=False)
    _listed: SharedReads[str, Listed] = field(init=False)
    """A group's or channel's index set, read once for the tabs of a fan-out."""
    _calls: SharedReads[str, OpenApproval | None] = field(init=False)
    _members: SharedReads[str, set[str] | None] = field(init=False)
    """A group's members, looked up once for the tabs of a fan-out (None: Slack cannot say)."""
    _in_channel: SharedReads[str, frozenset[str] | None] = field(init=False)
    """A channel's members, the same way."""
    _views: SharedReads[tuple[str, str], CallView] = field(init=False)
    """The calls shown, so that a call shown on 200 tabs is read once."""
    publisher: TabPublisher = field(init=False)
    """Publishes the tabs `refresh` asks for, one at a time (`run` started with the web app)."""

    def __post_init__(self) -> None:
        self._groups = SharedRead(self.index.groups)
        self._channels = SharedRead(self.index.channels)
        self._listed = SharedReads(lambda ps: self.index.latest(ps, INDEX_DEPTH))
        self._calls = SharedReads(self.index.open)
        self._views = SharedReads(self._read_views)
        self._members = SharedReads(lambda groups: _looked_up(groups, self.directory.members))
        self._in_channel = SharedReads(lambda found: _looked_up(found, self.channels.members))
        self.publisher = TabPublisher(
            redis=self.redis,
            keys=self.keys,
            publish=lambda user_id, since: self.publish(user_id, since=since),
            rate=self.rate,
            debounce_seconds=self.debounce_seconds,
        )

    async def _read_views(self, calls: list[tuple[str, str]]) -> dict[tuple[str, str], CallView]:
        views = await asyncio.gather(*(self.recorder.view(*call) for call in calls))
        return dict(zip(calls, views, strict=True))

    async def opened(self, user_id: str) -> None:
        """The person opened the tab: remember them as a viewer and show it fresh."""
        now = time.time()
        self._viewers[user_id] = now
        self._opened.set()
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zadd(self.keys.home.viewers, {user_id: now})
                pipe.zremrangebyscore(self.keys.home.viewers, 0, now - VIEWER_DAYS * 86400)
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
        scores: Any = await self.redis.zmscore(self.keys.home.viewers, asked)
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
                self.keys.home.viewers, since, "+inf", withscores=True
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
        """Publish the person's tab soon (debounced): they are put in line (`bot.home.publisher`),
        nothing more."""
        self.publisher.mark(user_id)

    async def publish(self, user_id: str, *, since: float | None = None) -> None:
        """Read what the tab shows (from reads begun at or after `since`, `time.monotonic()`;
        now if None) and publish it."""
        since = time.monotonic() if since is None else since
        waiting, more, about = await self.waiting_for(user_id, since=since)
        mine, count = await self.live.of_requester(user_id, RUNS_SHOWN)
        runs = [
            OwnRun(run=run, link=await self.links.thread(run.channel, run.thread)) for run in mine
        ]
        if self.in_flight is not None:
            await self.in_flight.after_requests()
        view = home_view(
            waiting, runs, more_waiting=more, about=about, more_runs=max(0, count - len(runs))
        )
        await self.client.views_publish(user_id=user_id, view=view)

    async def waiting_for(
        self, user_id: str, *, since: float | None = None
    ) -> tuple[list[WaitingCall], int, bool]:
        """The open approvals `user_id` may decide, newest first (as many as the tab shows),
        how many more there are, and whether that count is approximate (from the index's
        sizes: `runtime.waiting.index`)."""
        since = time.monotonic() if since is None else since
        groups: dict[str, set[str] | None] = {}
        seen = _ChannelsSeen()
        principals = [user_id, *await self._principals(user_id, groups, seen, since)]
        # Their own set is theirs alone; a group's or channel's is shared by the fan-out.
        own = await self.index.latest([user_id], INDEX_DEPTH)
        shared = await self._listed.since(principals[1:], since)
        listed = [*own.values(), *shared.values()]
        newest: dict[str, float] = {}
        for found in listed:
            newest.update(found.entries)
        members = sorted(newest, key=lambda member: newest[member], reverse=True)
        complete = all(len(found.entries) == found.total for found in listed)
        calls = await self._calls.since(members, since)
        if stale := [m for m in members if m in calls and calls[m] is None]:
            await self.index.prune(stale, principals)
        mine: list[OpenApproval] = []
        for member in members:
            approval = calls.get(member)
            if approval is not None and await self._may_decide(
                user_id, approval.gate, groups, seen, approval.copies
            ):
                mine.append(approval)
        first = mine[:WAITING_SHOWN]
        wanted = [(approval.run_id, approval.approval_id) for approval in first]
        views = await self._views.since(wanted, since)  # those not read lately, at once
        shown: list[WaitingCall] = []
        for approval, call in zip(first, wanted, strict=True):
            view = views.get(call)
            if view is None or view.envelope is None or view.call is None:
                continue
            run = RunView.of(view.envelope)
            if view.call.channel is None:
                link = await self.links.thread(run.conversation.channel, run.conversation.thread)
            else:  # asked for in a direct message: its card, in the approvers' channel
                link = await self.links.thread(view.call.channel, view.call.message_ts)
            self_ok = approval.gate.self_ok
            shown.append(WaitingCall(run=run, call=view.call, link=link, self_ok=self_ok))
        if complete:
            return shown, max(0, len(mine) - WAITING_SHOWN), False
        total = sum(found.total for found in listed)
        return shown, max(0, len(mine) - WAITING_SHOWN, total - len(stale) - len(shown)), True

    async def _principals(
        self, user_id: str, groups: dict[str, set[str] | None], seen: _ChannelsSeen, since: float
    ) -> list[str]:
        """The user groups (of those with open calls) `user_id` is in, and the channels (of
        those with calls anyone there may decide) they are a member of."""
        found: list[str] = []
        named = sorted(await self._groups.since(since))
        for group, members in (await self._members.since(named, since)).items():
            groups.setdefault(group, members)
        for group in named:
            if user_id in (groups.get(group) or ()):
                found.append(group)
        channels = sorted(await self._channels.since(since))
        in_channels = await self._in_channel.since(channels, since)
        for channel in channels:
            # Absent or None (Slack cannot say) fails closed: not listed.
            seen.members[channel] = in_channel = in_channels.get(channel)
            if in_channel is not None and user_id in in_channel:
                found.append(channel)
        return found

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
        channels. `copies`: the channels of the call's copies. Someone outside the workspace,
        named or not, is listed only where the call lets them decide (elsewhere their click
        would only be refused); when Slack cannot say, the call is not listed."""
        facts = _TabFacts(
            tab=self, user_id=user_id, groups=groups, seen=seen, where=(gate.channel, *copies)
        )
        try:
            return await decides(gate, user_id, facts)
        except (DirectoryUnavailable, StandingUnknown):
            return False


@dataclass(kw_only=True, slots=True)
class _TabFacts:
    """What a tab finds out about its person for one call (`runtime.deciders.Facts`), from what
    it found for the calls before: a group whose members Slack cannot say has none here."""

    tab: HomeTab
    user_id: str
    groups: dict[str, set[str] | None]
    seen: _ChannelsSeen
    where: tuple[str, ...]
    """The call's channel and its copies' (for a call anyone there may decide)."""

    async def members(self, group_id: str) -> set[str]:
        if group_id not in self.groups:
            try:
                self.groups[group_id] = await self.tab.directory.members(group_id)
            except DirectoryUnavailable:
                self.groups[group_id] = None
        return self.groups[group_id] or set()

    async def present(self) -> bool:
        channels = self.tab.channels
        return await channels.channel_with(self.user_id, self.where, self.seen.members) is not None

    async def outside(self) -> bool:
        """Asked of Slack once per tab."""
        if self.seen.inside is None:
            self.seen.inside = (await self.tab.members.standing(self.user_id)).inside
        return not self.seen.inside


async def _looked_up(
    names: list[str], members: Callable[[str], Awaitable[M]]
) -> dict[str, M | None]:
    """The members of each group or channel, one after another; None where Slack cannot say
    (fail closed: nothing listed by it)."""
    found: dict[str, M | None] = {}
    for name in names:
        try:
            found[name] = await members(name)
        except DirectoryUnavailable:
            found[name] = None
    return found


@dataclass(kw_only=True, slots=True)
class _ChannelsSeen:
    """What one tab found out once for all its calls: the members of the channels whose calls
    anyone there may decide, and whether its person is inside the workspace."""

    members: dict[str, frozenset[str] | None] = field(default_factory=dict)
    """Each channel's members (None: Slack cannot say)."""
    inside: bool | None = None
    """Whether the tab's person is a member of the workspace (None: not asked yet)."""
