"""Escalating a call still undecided after its rule's `escalate_after_seconds`.

The rule's `escalate_to` are written into the call's own gate by the escalation script
(compare-and-set on the gate as read, with the `escalated` audit entry in the same step), so the
decision script lets them decide. Then the thread mentions them and they get copies of the card,
as with `notify`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.db.keys import Keys
from runtime.record import scripts as rs
from runtime.record.envelope import PendingCall
from runtime.record.layout import CallGate
from runtime.record.reads import GateRead
from runtime.record.view import read
from runtime.reporter import Reach, RunView
from runtime.waiting.copies import CardCopies

log = logging.getLogger(__name__)

# A decision or another escalation racing this one changes the gate: read it again, this often.
ATTEMPTS = 3


@dataclass(kw_only=True)
class Escalation:
    redis: aioredis.Redis
    keys: Keys
    reach: Reach
    copies: CardCopies
    _script: Any = field(init=False)

    def __post_init__(self) -> None:
        self._script = rs.once(self.redis, self.keys, rs.ESCALATE)

    async def escalate(
        self, run: RunView, call: PendingCall, targets: tuple[str, ...]
    ) -> CallGate | None:
        """Let `targets` decide `call` and tell them; the widened gate, or None when the call
        no longer waits (or its gate is another version's) and nothing was done."""
        key = self.keys.run(run.run_id)
        for _ in range(ATTEMPTS):
            stored = await read(self.redis, self.keys, GateRead, run.run_id, call.approval_id)
            raw, gate = stored.written, stored.gate
            if raw is None:
                return None
            if gate is None:
                log.warning("run %s: gate of %s unreadable here", run.run_id, call.approval_id)
                return None
            widened = gate.widened(targets)
            details = {
                "approval_id": call.approval_id,
                "call_id": gate.call_id,
                "tool": gate.tool,
                "agent": gate.agent,
                "requester": gate.requester,
                "channel": gate.channel,
                "digest": gate.digest,
                "escalate_to": list(targets),
            }
            reply = await self._script(
                rs.Escalate(
                    run=key,
                    audit=self.keys.shard_of(run.run_id).audit,
                    approval_id=call.approval_id,
                    read_gate=raw,
                    gate=widened.stored(),
                    run_id=run.run_id,
                    event=AuditEvent.ESCALATED,
                    details=json.dumps(details),
                )
            )
            status = reply.decode() if isinstance(reply, bytes) else str(reply)
            if status != "changed":
                break
        if status not in ("escalated", "already"):
            log.info("run %s: %s not escalated (%s)", run.run_id, call.approval_id, status)
            return None
        log.info("run %s: %s escalated to %s", run.run_id, call.approval_id, ", ".join(targets))
        call = widened.applied_to(call)
        await self.reach.escalated(run, call, targets)
        await self.copies.send(run, call, targets)
        return widened
