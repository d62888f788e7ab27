"""Nudges for an open approval: a reminder at each `REMINDER_AT` fraction of its lifetime, and
its escalation (`runtime.waiting.escalation`), as its `CallReach` planned them.

Polled from the `reminders` due set, which holds one entry per open call, due at its next
nudge; a decision or expiry removes the entry first, so a nudge only goes out for a call still
waiting. Once the nudges due are done (and marked done in `nudged:<id>`, so a retry after a crash
does not repeat them), the entry moves to the next nudge, or goes after the last.

A reminder mentions who may decide now (the gate, widened by an escalation), never the requester
who may not approve their own run; when anyone in the channel may decide, it mentions nobody.

Once an edit moved a call under a stricter rule, the escalation is that rule's, from when the
call was asked (`CallReach.under`): the looser rule's never widens the stricter gate, and the
stricter rule's is done even when the call's nudges were marked done past its time (it had
waited longer than the stricter rule allows before the edit), as long as its people are not in
the gate yet.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.deciders import may_approve
from runtime.record import layout as rr
from runtime.record import scripts as rs
from runtime.record.envelope import PendingCall
from runtime.record.layout import CallGate
from runtime.record.reach import CallReach, Nudge
from runtime.record.reads import Nudges
from runtime.record.store import RunStore
from runtime.record.view import read
from runtime.reporter import Reporter, RunView
from runtime.waiting.escalation import Escalation

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Reminders:
    store: RunStore
    reporter: Reporter
    redis: aioredis.Redis
    keys: Keys
    escalation: Escalation | None = None
    """Without one (a worker that cannot reach people elsewhere), escalations are skipped."""
    _set: Any = field(init=False)

    def __post_init__(self) -> None:
        self._set = rs.run_once(self.redis, rs.FENCED_WRITE, keeps=False)

    async def handle(self, member: str) -> bool:
        """Do the nudges due; True removes the entry, False keeps it (moved to the next nudge,
        or left for a retry after the lease)."""
        run_id, _, approval_id = member.partition(":")
        record, call = await self.store.find_call(run_id, approval_id)
        if record is None or call is None or call.decision is not None:
            return True
        if record.status != "waiting":
            return True
        if call.message_ts is None:
            return False  # its card is not posted yet
        run = RunView.of(record.envelope)
        reach, gate, done_until = await self._read(run_id, approval_id)
        if reach is None:  # asked by an older version: its one reminder
            return await self._remind(run, call, gate)
        reach = reach.under(gate, call.expires_at)
        now = await self.store.server_time()
        done = done_until
        for nudge in _due(reach, gate, done_until, now):
            if nudge.kind == "escalate" and self.escalation is not None:
                try:
                    gate = await self.escalation.escalate(run, call, reach.escalate_to) or gate
                except Exception:
                    log.warning(
                        "run %s: escalation of %s failed", run_id, approval_id, exc_info=True
                    )
                    return False
            elif nudge.kind == "remind" and not await self._remind(run, call, gate):
                return False
            await self._set(
                rs.FencedSet(
                    run=self.keys.run(run_id),
                    audit=self.keys.shard_of(run_id).audit,
                    fence="",
                    entry="",
                    fields=[rr.NUDGED + approval_id, repr(done := max(done, nudge.at))],
                )
            )
        following = reach.next_after(now)
        if following is None:
            return True
        await self.redis.zadd(self.keys.shard_of(run_id).reminders, {member: following}, xx=True)
        return False

    async def _read(
        self, run_id: str, approval_id: str
    ) -> tuple[CallReach | None, CallGate | None, float]:
        view = await read(self.redis, self.keys, Nudges, run_id, approval_id)
        reach = view.reach
        # Another version's reach: remind as that version would, by the call's approvers.
        gate = None if view.has_reach and reach is None else view.gate
        return reach, gate, view.nudged or 0.0

    async def _remind(self, run: RunView, call: PendingCall, gate: CallGate | None) -> bool:
        if gate is not None:
            named = may_approve(
                (*gate.users, *gate.groups), requester=gate.requester, self_ok=gate.self_ok
            )
            approvers = () if gate.anyone else named
            call = call.model_copy(update={"approvers": approvers})
        try:
            await self.reporter.approval_reminder(run, call)
        except Exception:
            log.warning(
                "run %s: reminder for %s not sent yet", run.run_id, call.approval_id, exc_info=True
            )
            return False
        return True


def _due(reach: CallReach, gate: CallGate | None, done_until: float, now: float) -> list[Nudge]:
    """The nudges due by `now`; with a re-gated call, also the stricter rule's escalation when
    its time is before the nudges marked done and the gate still lacks its people."""
    due = reach.due(done_until, now)
    late = reach.escalate_at is not None and reach.escalate_at <= done_until
    if late and gate is not None and gate.regated and gate.widened(reach.escalate_to) != gate:
        due.insert(0, Nudge(reach.escalate_at or 0.0, "escalate"))
    return due
