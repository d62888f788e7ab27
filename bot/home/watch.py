"""Republishing Home tabs when something changes for their viewers.

Every change worth showing already lands in the audit trail (a run started, a call asked for,
decided, expired or escalated, a run resumed, stopped, finished or failed), from whichever
process made it. The web process follows the trail and refreshes the tabs of the people each
event concerns who opened theirs lately: the run's requester ("Your runs"), whoever decided, and
everyone who may decide the run's open calls ("Waiting for you"): for a call anyone in its
channel may decide, the members of its channel and of its copies'
(`bot.slack.channel_members`). Someone joining or leaving a channel (`member_moved`) has their
own tab republished. `HomeTab.refresh` debounces.
Every web process follows the trail; the first to claim an entry in Redis (`HomeKeys.change`)
republishes the tabs it concerns, also of viewers who opened theirs through another process, and
the others leave it.

What it costs: nothing while nobody has opened a Home tab lately (the viewers are read again
every `VIEWERS_RELOAD_SECONDS`; one opening through this process starts the watch at once).
Otherwise one blocking read of the trail per batch of events (and one per
`BLOCKING_READ_SECONDS` while nothing happens), on a client of its own whose socket timeout
allows the long wait; and per event the run's gates for the events that change who may decide
what, or only its requester for those that change nothing but their own list of runs, and one
`SET NX` per entry per process for the claim.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.home.tab import HomeTab
from bot.slack.channel_members import ChannelMembers
from bot.slack.directory import ApproverDirectory, DirectoryUnavailable
from runtime.audit import AuditEvent
from runtime.db import FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS, Keys, longest_block, stream_tail
from runtime.process import Backoff, Shutdown, TaskSet
from runtime.record import CallGate, Requester, parse_copies, parse_gate, read
from runtime.record import layout as rr

log = logging.getLogger(__name__)

UNCHANGED = frozenset({AuditEvent.DENIED, AuditEvent.EXECUTED, AuditEvent.REPLAYED})
OWN_RUNS_ONLY = frozenset({AuditEvent.STARTED, AuditEvent.RESUMED, AuditEvent.FINISHED})
"""Events that change no one's "Waiting for you": a run starts with no open call, resumes after
the decisions that closed them, and finishes with every call decided."""
CLAIM_SECONDS = 60.0
"""How long a web process's claim on an audit entry keeps the others from republishing the tabs
it concerns (longer than any process takes to read the entry after another did)."""
GATE_WAIT_SECONDS = 3.0
"""`requested` is written just before the call's gate: how long to look for the gate."""


@dataclass(kw_only=True)
class HomeWatch:
    redis: aioredis.Redis
    keys: Keys
    home: HomeTab
    directory: ApproverDirectory
    channels: ChannelMembers
    tasks: TaskSet
    reads: aioredis.Redis | None = None
    """The client for the blocking read of the trail (`bot.wiring.blocking_reads_redis`), so that it
    may wait long; `redis` if None, the wait then kept under its socket timeout."""
    _stopping: Shutdown = field(default_factory=Shutdown)

    def stop(self) -> None:
        self._stopping.set()

    async def member_moved(self, user_id: str) -> None:
        """Someone joined or left a channel: the calls anyone there may decide come to their
        tab or leave it (republished if they opened it lately)."""
        try:
            for person in await self.home.viewers({user_id}):
                self.home.refresh(person)
        except RedisError:
            log.warning("home tab of %s: not republished after a channel change", user_id)

    async def run(self) -> None:
        # One follower per shard's audit stream (one without a cluster). Where each starts is
        # asked one at a time: redis-py's cluster client, asked many things at once before its
        # first answer, loses some of the connections it opens meanwhile.
        streams = [shard.audit for shard in self.keys.shards]
        starts = [
            await stream_tail(self.redis, stream, self._stopping, follower="home tabs")
            for stream in streams
        ]
        await asyncio.gather(
            *(self._follow(s, last) for s, last in zip(streams, starts, strict=True))
        )

    async def _follow(self, stream: str, last: str) -> None:
        reads = self.reads or self.redis
        block_ms = int(longest_block(reads) * 1000)
        backoff = Backoff(FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS)
        while not self._stopping.is_set():
            try:
                self.home.forget_openings()
                anyone = await self.home.any_viewers()
                backoff.succeeded()  # Redis answers
                if not anyone:
                    # No change would show anywhere: follow nothing until someone opens a tab,
                    # then from the newest event (the tab they open is drawn fresh).
                    await self._stopping.unless_stopped(self.home.opening())
                    last = await stream_tail(
                        self.redis, stream, self._stopping, follower="home tabs"
                    )
                    continue
                reply: Any = await self._stopping.unless_stopped(
                    reads.xread({stream: last}, count=200, block=block_ms)
                )
                for _stream, entries in reply or []:
                    viewers = await self.home.any_viewers()
                    for entry_id, fields in entries:
                        last = entry_id
                        if viewers:
                            await self._changed(stream, entry_id, fields)
            except RedisError:
                # Backs off as the connection's own message does: one line per attempt.
                delay = backoff.failed()
                log.warning("home tabs: the audit trail cannot be read; retrying in %g s", delay)
                await self._stopping.sleep(delay)

    async def _tail(self, stream: str) -> str:
        return await stream_tail(self.redis, stream, self._stopping, follower="home tabs")

    async def _changed(
        self, stream: str, entry_id: bytes | str, fields: dict[bytes, bytes]
    ) -> None:
        event = _text(fields.get(b"event", b""))
        if event in UNCHANGED:
            return
        # Every web process follows every change; one republishes what it concerns.
        claim = self.keys.home.change(stream, _text(entry_id))
        if not await self.redis.set(claim, "1", nx=True, px=int(CLAIM_SECONDS * 1000)):
            return
        run_id = _text(fields.get(b"run_id", b""))
        try:
            details = json.loads(fields.get(b"details", b"{}"))
        except ValueError:
            details = {}
        if not isinstance(details, dict):
            return
        if event == AuditEvent.REQUESTED:
            approval_id = str(details.get("approval_id", ""))
            self.tasks.spawn(self._after_request(run_id, approval_id), name=f"home-watch:{run_id}")
            return
        await self._refresh(run_id, details, gates=event not in OWN_RUNS_ONLY)

    async def _after_request(self, run_id: str, approval_id: str) -> None:
        """Once the call's gate is written, the people who may decide it are known."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATE_WAIT_SECONDS
        try:
            while loop.time() < deadline:
                if await self.redis.hexists(self.keys.run(run_id), rr.GATE + approval_id):
                    await self._refresh(run_id, {}, gates=True)
                    return
                await self._stopping.sleep(0.1)
        except RedisError:
            log.warning("home tabs: run %s not followed", run_id)

    async def _refresh(self, run_id: str, details: dict[str, Any], *, gates: bool) -> None:
        try:
            people = await self._concerned(run_id, details, gates=gates)
            for person in await self.home.viewers(people):
                self.home.refresh(person)
        except RedisError:
            log.warning("home tabs: run %s not followed", run_id)

    async def _concerned(self, run_id: str, details: dict[str, Any], *, gates: bool) -> set[str]:
        people = {str(details[k]) for k in ("requester", "user_id") if details.get(k)}
        key = self.keys.run(run_id)
        if not gates:
            if not details.get("requester"):
                found = await read(self.redis, self.keys, Requester, run_id)
                if found.requester:
                    people.add(found.requester)
            return people
        names: Any = await self.redis.hkeys(key)
        calls = [_text(n)[len(rr.GATE) :] for n in names if _text(n).startswith(rr.GATE)]
        fields = [f for aid in calls for f in (rr.GATE + aid, rr.COPIES + aid)]
        values: Any = await self.redis.hmget(key, [rr.REQUESTER, *fields])
        if values and values[0]:
            people.add(_text(values[0]))
        for raw, copies in zip(values[1::2], values[2::2], strict=True):
            # None: the gate went since its name was read.
            if raw is not None and (gate := parse_gate(raw)) is not None:
                people.update(await self._deciders(gate, copies))
        return people

    async def _deciders(self, gate: CallGate, copies: bytes | None) -> set[str]:
        """Who may decide the call, as far as Slack says: its users, its groups' members, and
        for a call anyone may decide, the members of its channel and of its copies'."""
        people = set(gate.users)
        channels = [gate.channel, *(copy.channel for copy in parse_copies(copies))]
        places = [
            *((self.directory.members, group) for group in gate.groups),
            *((self.channels.members, c) for c in dict.fromkeys(channels) if gate.anyone),
        ]
        for members_of, place in places:
            try:
                people.update(await members_of(place))
            except DirectoryUnavailable:
                continue
        return people


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
