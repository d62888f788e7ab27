"""The runs that have not ended, for `/agent status` and the Home tab.

`Keys.live_runs` lists them; the run record's scripts keep it (create adds a run, close and stop
remove it). Reading is bounded: the newest `SCAN_LIMIT` runs, in two pipelined round trips (the
small plain fields of all, then the envelopes of those asked for). A run whose record expired
without closing (abandoned, or kept past its TTL) is dropped from the set on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.record.reads import LiveRead, Owner, QuorumRead
from runtime.record.view import of_queued, queue

SCAN_LIMIT: Final = 1000
"""Live runs looked at per question (the newest first)."""

RunState = Literal["working", "waiting", "resuming", "finishing", "stopping"]

_STATES: dict[str, RunState] = {
    "running": "working",
    "waiting": "waiting",
    "ready": "resuming",
    "resuming": "resuming",
    "finishing": "finishing",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class LiveRun:
    run_id: str
    agent: str
    """`?` when this version cannot read the run's envelope."""
    task: str
    channel: str
    requester: str
    thread: str | None
    state: RunState
    pending: int
    """Open calls, while `waiting`."""
    age_seconds: float
    approvals_needed: int = 0
    """Approvals still needed, while `waiting`: one per open call, more for a call under a
    quorum (its quorum less the approvals counted so far)."""
    always: tuple[tuple[str, str], ...] = ()
    """(tool, who pressed it) of each Approve always of the run: what may approve its later
    calls under the same rule."""


class LiveRuns:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, scan_limit: int = SCAN_LIMIT) -> None:
        self._redis = redis
        self._keys = keys
        self._scan_limit = scan_limit

    async def in_channel(self, channel: str) -> list[LiveRun]:
        """This channel's live runs, newest first."""
        return await self._select(lambda run_channel, _requester: run_channel == channel)

    async def of_requester(self, user_id: str, limit: int) -> tuple[list[LiveRun], int]:
        """The newest `limit` runs `user_id` started that are still live, and how many they
        have (about: one that ended unseen counts until read), by their own set
        (`Shard.live_runs_of`): a read that does not grow with the others' runs. A run an
        earlier version started is not in it (it is in `Keys.live_runs`)."""
        ids: list[tuple[str, float]] = []
        total = 0
        for shard in self._keys.shards:  # one on a single Redis; newest of all, merged
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.zrevrange(shard.live_runs_of(user_id), 0, limit - 1, withscores=True)
                pipe.zcard(shard.live_runs_of(user_id))
                listed, count = await pipe.execute()
            ids.extend((_text(member), score) for member, score in listed)
            total += int(count)
        ids = sorted(ids, key=lambda entry: entry[1], reverse=True)[:limit]
        runs = await self._read(ids)
        # Ended without closing (its record expired): a close would have taken it out.
        for run_id in {run_id for run_id, _ in ids} - {run.run_id for run in runs}:
            await self._redis.zrem(self._keys.shard_of(run_id).live_runs_of(user_id), run_id)
            total -= 1
        return runs, max(total, len(runs))

    async def one(self, run_id: str) -> LiveRun | None:
        """One run, if it is live."""
        score = await self._redis.zscore(self._keys.shard_of(run_id).live_runs, run_id)
        if score is None:
            return None
        runs = await self._read([(run_id, float(score))])
        return runs[0] if runs else None

    async def _select(self, keep: Callable[[str, str], bool]) -> list[LiveRun]:
        ids: list[tuple[str, float]] = []
        for shard in self._keys.shards:  # one on a single Redis; newest of all, merged
            listed: Any = await self._redis.zrevrange(
                shard.live_runs, 0, self._scan_limit - 1, withscores=True
            )
            ids.extend((_text(member), score) for member, score in listed)
        ids = sorted(ids, key=lambda entry: entry[1], reverse=True)[: self._scan_limit]
        async with self._redis.pipeline(transaction=False) as pipe:
            for run_id, _ in ids:
                queue(pipe, self._keys, Owner, run_id)
            replies: list[Any] = await pipe.execute()
        pairs = [
            (entry, of_queued(Owner, entry[0], reply))
            for entry, reply in zip(ids, replies, strict=True)
        ]
        gone = [run_id for (run_id, _), owner in pairs if not owner.channel]
        for run_id in gone:
            await self._redis.zrem(self._keys.shard_of(run_id).live_runs, run_id)
        chosen = [
            entry
            for entry, owner in pairs
            if owner.channel and owner.requester and keep(owner.channel, owner.requester)
        ]
        return await self._read(chosen)

    async def _read(self, ids: list[tuple[str, float]]) -> list[LiveRun]:
        if not ids:
            return []
        # TIME on its own: a cluster pipeline refuses a command without a key.
        seconds, micros = await self._redis.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            for run_id, _ in ids:
                queue(pipe, self._keys, LiveRead, run_id)
            replies: list[Any] = await pipe.execute()
        now = seconds + micros / 1_000_000
        views = [
            of_queued(LiveRead, run_id, reply)
            for (run_id, _), reply in zip(ids, replies, strict=True)
        ]
        needed = await self._approvals_needed(views)
        runs = []
        for (run_id, started), view in zip(ids, views, strict=True):
            state = _STATES.get(view.status or "")
            if state is None or view.channel is None or view.requester is None:
                continue  # ended, failed or stopped meanwhile
            envelope = view.envelope
            runs.append(
                LiveRun(
                    run_id=run_id,
                    agent=envelope.root_agent if envelope else "?",
                    task=envelope.task if envelope else "",
                    channel=view.channel,
                    requester=view.requester,
                    thread=view.thread or None,
                    state="stopping" if view.stopped else state,
                    pending=view.pending or 0,
                    age_seconds=max(0.0, now - started),
                    approvals_needed=needed.get(run_id, view.pending or 0),
                    always=tuple((p.key.tool, p.user_id) for p in view.always or ()),
                )
            )
        return runs

    async def _approvals_needed(self, views: list[LiveRead]) -> dict[str, int]:
        """For each waiting run with a call under a quorum: the approvals it still needs (one
        more pipelined read, of those calls only; the others need one approval per open call)."""
        asked = [
            (view, call)
            for view in views
            if view.status == "waiting" and view.envelope is not None
            for call in view.envelope.calls
            if call.quorum > 1
        ]
        if not asked:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for view, call in asked:
                queue(pipe, self._keys, QuorumRead, view.run_id, call.approval_id)
            replies: list[Any] = await pipe.execute()
        extra: dict[str, int] = {}
        for (view, call), reply in zip(asked, replies, strict=True):
            counted = of_queued(QuorumRead, view.run_id, reply, call.approval_id)
            if not counted.decided:
                # The open call counts once in `pending` already.
                more = call.quorum - len(counted.approvals or ()) - 1
                extra[view.run_id] = extra.get(view.run_id, 0) + max(more, 0)
        return {
            view.run_id: (view.pending or 0) + extra[view.run_id]
            for view in views
            if view.run_id in extra
        }


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
