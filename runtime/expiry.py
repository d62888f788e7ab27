"""Expiring approvals nobody decided: workers poll a sorted set of deadlines.

Keyspace notifications would be simpler but are lost while no worker listens, go to every
worker, and arrive late under load. Instead each worker claims due entries with a lease (their
score moves forward by the lease, so no other worker sees them meanwhile), records the expiry
through the same script as a click, tells the thread, and only then removes the entry. A worker
that dies in between lets its lease lapse and another one finishes the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.approvals import Approvals
from runtime.audit import AuditTrail
from runtime.envelope import UnreadableEnvelope
from runtime.keys import Keys
from runtime.reporter import Reporter, RunView
from runtime.run_store import RunStore

log = logging.getLogger(__name__)

# Cost per tick is O(log N + due): it grows with what is due, not with what is pending.
_CLAIM_DUE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), member)
end
return due
"""


@dataclass(kw_only=True)
class ExpirySweeper:
    redis: aioredis.Redis
    keys: Keys
    approvals: Approvals
    store: RunStore
    reporter: Reporter
    audit: AuditTrail
    interval: float = 1.0
    lease_seconds: float = 60.0
    batch: int = 100
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._claim = self.redis.register_script(_CLAIM_DUE)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        while not self._stopping.is_set():
            try:
                while await self.sweep() == self.batch and not self._stopping.is_set():
                    pass  # a full batch: more may be due right now
            except RedisError:
                log.warning("expiry sweep failed; retrying", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=self.interval)

    async def sweep(self) -> int:
        """Handle the approvals due now; return how many were claimed."""
        members = await self._claim(
            keys=[self.keys.deadlines], args=[self.lease_seconds, self.batch]
        )
        for raw in members:
            member = raw.decode()
            if await self._expire(member):
                await self.redis.zrem(self.keys.deadlines, member)
        return len(members)

    async def _expire(self, member: str) -> bool:
        """Expire one approval; False leaves it for a retry after the lease."""
        run_id, _, approval_id = member.partition(":")
        result = await self.approvals.expire(run_id, approval_id)
        expired_now = result.status == "recorded"
        if not expired_now and not (
            result.status == "decided"
            and result.decision is not None
            and result.decision.outcome == "expired"
        ):
            # Decided by a person first, or the run is gone: nothing to tell.
            return result.status != "early"
        try:
            record = await self.store.load(run_id, with_state=False)
        except UnreadableEnvelope:
            log.exception("run %s: cannot show the expiry of %s", run_id, approval_id)
            return True
        call = record.envelope.call(approval_id) if record else None
        if record is None or call is None:
            return True
        if expired_now:
            await self.audit.record("expired", run_id, approval_id=approval_id, tool=call.tool)
        try:
            await self.reporter.approval_expired(RunView.of(record.envelope), call)
        except Exception:
            log.warning("run %s: expiry of %s not shown yet", run_id, approval_id, exc_info=True)
            return False
        return True
