"""Every approval still waiting for a person, in any channel, with who may decide it.

The `deadlines` due set lists every open approval; each has its gate in its run's record. Reading
is bounded: the `SCAN_LIMIT` latest deadlines (the newest approvals, as lifetimes go), one
pipelined `HMGET` each. Who among them a person may decide is the caller's to say (it needs
the user groups' members, which the runtime does not know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.record.layout import CallGate
from runtime.record.reads import OpenRead
from runtime.record.view import of_queued, queue

SCAN_LIMIT: Final = 2000
"""Open approvals looked at per question."""


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
    may be decided by anyone in one of them as in its own channel."""


class OpenApprovals:
    def __init__(self, redis: aioredis.Redis, keys: Keys, *, scan_limit: int = SCAN_LIMIT) -> None:
        self._redis = redis
        self._keys = keys
        self._scan_limit = scan_limit

    async def all(self) -> list[OpenApproval]:
        """Open approvals with a gate this version reads, newest first."""
        members: list[tuple[str, float]] = []
        for shard in self._keys.shards:  # one on a single Redis; latest of all, merged
            listed: Any = await self._redis.zrevrange(
                shard.deadlines, 0, self._scan_limit - 1, withscores=True
            )
            members.extend((_text(member), float(score)) for member, score in listed)
        members = sorted(members, key=lambda entry: entry[1], reverse=True)[: self._scan_limit]
        # TIME on its own: a cluster pipeline refuses a command without a key.
        seconds, micros = await self._redis.time()
        async with self._redis.pipeline(transaction=False) as pipe:
            for member, _ in members:
                run_id, _, approval_id = member.partition(":")
                queue(pipe, self._keys, OpenRead, run_id, approval_id)
            replies: list[Any] = await pipe.execute()
        now = seconds + micros / 1_000_000
        found = []
        for (member, deadline), reply in zip(members, replies, strict=True):
            run_id, _, approval_id = member.partition(":")
            view = of_queued(OpenRead, run_id, reply, approval_id)
            gate, reach = view.gate, view.reach
            if view.status != "waiting" or view.decided or deadline <= now:
                continue
            if gate is None or (view.has_reach and reach is None):
                continue  # gone, or another version's: it shows its own
            found.append(
                OpenApproval(
                    run_id=run_id,
                    approval_id=approval_id,
                    gate=gate,
                    deadline=deadline,
                    asked_at=reach.asked_at if reach else deadline,
                    copies=tuple(copy.channel for copy in view.copies or ()),
                )
            )
        return sorted(found, key=lambda approval: approval.asked_at, reverse=True)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
