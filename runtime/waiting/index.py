"""The open approvals a person, a user group or a channel is named for, newest first, by index.

The record's scripts keep the index with the gates (`runtime/record/lua/home_index.lua`): the
script that writes a call's gate (the run stops for it, an escalation widens it, an edit re-gates
it, a copy is posted) adds the call to one sorted set per user and group the gate names, or, for
a call anyone in its channel may decide, per channel of its card and copies; the scripts that
decide, stop or close it take it out. Everything of one run lives in the run's shard, so each
shard has its own sets and a reader asks every shard in one pipeline (one on a single Redis).

Reading costs what is asked, not what waits: per shard one `ZREVRANGE` (the newest `depth`) and
one `ZCARD` per principal, then one `HMGET` per call found. Each call is checked against its
record (still waiting, undecided, before its deadline, a gate this version reads) and entries
that fail are dropped from the index, so that a call closed by a path that did not take it out
(a run's hash that expired) costs one read once. The count is approximate: `ZCARD`s summed,
stale entries and a call named twice (a user and a group) included.

During a rolling deploy, a worker of an earlier version writes gates without index entries:
those calls are on their cards (and copies) as always but missing from the Home tab until their
run stops again under this version. Nothing else depends on the index; who may decide stays the
decision script's to judge, from the gate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.record.layout import CallGate
from runtime.record.reads import OpenRead
from runtime.record.view import of_queued, queue


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenApproval:
    run_id: str
    approval_id: str
    gate: CallGate
    deadline: float
    asked_at: float
    """When the run stopped for it (its deadline when an older version did not say)."""
    copies: tuple[str, ...] = ()
    """The channels of the card's copies (a direct message's too): a call anyone may decide
    is decided by the members of its channel or of a copy's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Listed:
    """What the index names for one principal: its newest calls, at most `depth`."""

    entries: tuple[tuple[str, float], ...]
    """(`run_id:approval_id`, when asked), newest first."""
    total: int
    """Entries of the principal's sets (approximate: see the module docstring)."""


class WaitingIndex:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def groups(self) -> set[str]:
        """The user groups some shard has an index for (one `SMEMBERS` per shard)."""
        return await self._names("home_groups")

    async def channels(self) -> set[str]:
        """The channels some shard has an index for (calls anyone there may decide)."""
        return await self._names("home_channels")

    async def _names(self, which: str) -> set[str]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for shard in self._keys.shards:
                pipe.smembers(getattr(shard, which))
            replies: list[Any] = await pipe.execute()
        return {_text(m) for members in replies for m in members}

    async def latest(self, principals: Sequence[str], depth: int) -> dict[str, Listed]:
        """Per principal, the newest `depth` calls it is named for (of every shard, merged)."""
        if not principals:
            return {}
        # One pipeline for every shard: a cluster client sends each node its part at once.
        async with self._redis.pipeline(transaction=False) as pipe:
            for shard in self._keys.shards:
                for principal in principals:
                    pipe.zrevrange(shard.home_waiting(principal), 0, depth - 1, withscores=True)
                    pipe.zcard(shard.home_waiting(principal))
            replies: list[Any] = await pipe.execute()
        entries: dict[str, list[tuple[str, float]]] = {p: [] for p in principals}
        totals = dict.fromkeys(principals, 0)
        per_shard = 2 * len(principals)
        for start in range(0, len(replies), per_shard):
            shard_replies = replies[start : start + per_shard]
            for principal, listed, count in zip(
                principals, shard_replies[::2], shard_replies[1::2], strict=True
            ):
                totals[principal] += int(count)
                entries[principal].extend((_text(m), float(score)) for m, score in listed)
        return {
            p: Listed(
                entries=tuple(sorted(entries[p], key=lambda e: e[1], reverse=True)[:depth]),
                total=totals[p],
            )
            for p in principals
        }

    async def open(self, members: Iterable[str]) -> dict[str, OpenApproval | None]:
        """The calls of `members` (`run_id:approval_id`) by member: one pipelined `HMGET`
        each. None: closed (decided, stopped, gone), for `prune`; absent: open but not to be
        shown (past its deadline, its expiry pending; another version's)."""
        wanted = list(dict.fromkeys(members))
        if not wanted:
            return {}
        # TIME on its own: a cluster pipeline refuses a command without a key.
        seconds, micros = await self._redis.time()
        now = seconds + micros / 1_000_000
        async with self._redis.pipeline(transaction=False) as pipe:
            for member in wanted:
                run_id, _, approval_id = member.partition(":")
                queue(pipe, self._keys, OpenRead, run_id, approval_id)
            replies: list[Any] = await pipe.execute()
        found: dict[str, OpenApproval | None] = {}
        for member, reply in zip(wanted, replies, strict=True):
            run_id, _, approval_id = member.partition(":")
            view = of_queued(OpenRead, run_id, reply, approval_id)
            gate, reach, deadline = view.gate, view.reach, view.deadline
            if view.status != "waiting" or view.decided or gate is None or deadline is None:
                found[member] = None
            elif deadline > now and not (view.has_reach and reach is None):
                found[member] = OpenApproval(
                    run_id=run_id,
                    approval_id=approval_id,
                    gate=gate,
                    deadline=deadline,
                    asked_at=reach.asked_at if reach else deadline,
                    copies=tuple(copy.channel for copy in view.copies or ()),
                )
        return found

    async def prune(self, stale: Iterable[str], principals: Sequence[str]) -> None:
        """Take closed calls (`open`'s None) out of the sets of `principals`."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for member in stale:
                shard = self._keys.shard_of(member.partition(":")[0])
                for principal in principals:
                    pipe.zrem(shard.home_waiting(principal), member)
            await pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
