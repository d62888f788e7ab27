"""Expiring approvals nobody decided in time (polled from the `deadlines` due set).

The expiry is recorded through the same script as a click, so a click and an expiry racing for
one approval resolve to exactly one outcome; the card is updated before the entry is removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runtime.approvals import Approvals, AuditContext
from runtime.reporter import Reporter, RunView
from runtime.run_store import RunStore

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Expiry:
    approvals: Approvals
    store: RunStore
    reporter: Reporter

    async def handle(self, member: str) -> bool:
        """Expire one approval; False leaves it for a retry after the lease."""
        run_id, _, approval_id = member.partition(":")
        # An unreadable run is still expired: its resume then reports what cannot be read.
        record, call = await self.store.find_call(run_id, approval_id)
        context = AuditContext.of(record.envelope, call) if record and call else None
        result = await self.approvals.expire(run_id, approval_id, context)
        if result.status == "early":
            return False
        decision = result.decision
        if record is None or call is None or decision is None or decision.outcome != "expired":
            return True  # decided by a person first, or nothing left to show it on
        if call.message_ts is None:
            return True  # the card was never posted
        try:
            await self.reporter.approval_expired(
                RunView.of(record.envelope), call.model_copy(update={"decision": decision})
            )
        except Exception:
            log.warning("run %s: expiry of %s not shown yet", run_id, approval_id, exc_info=True)
            return False
        return True
