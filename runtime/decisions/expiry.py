"""Expiring approvals nobody decided in time (polled from the `deadlines` due set).

The expiry is recorded through the same script as a click, so a click and an expiry racing for
one approval resolve to exactly one outcome; the card is updated before the entry is removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runtime.decisions.recorder import DecisionRecorder
from runtime.metrics import count_decision
from runtime.record.store import RunStore
from runtime.reporter import Reporter, RunView

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Expiry:
    recorder: DecisionRecorder
    reporter: Reporter
    store: RunStore

    async def handle(self, member: str) -> bool:
        """Expire one approval; False leaves it for a retry after the lease."""
        run_id, _, approval_id = member.partition(":")
        # An unreadable run is still expired: its resume then reports what cannot be read.
        view = await self.recorder.view(run_id, approval_id)
        result = await self.recorder.expire(view)
        if result.status == "recorded":
            call = view.call
            count_decision(
                result.decision,
                tool=call.tool if call else "",
                card_ts=call.message_ts if call else None,
            )
        if result.status == "early":
            return False
        decision = result.decision
        if view.envelope is None or view.call is None or decision is None:
            return True  # nothing left to show it on
        if decision.outcome != "expired" or view.call.message_ts is None:
            return True  # decided by a person first, or the card was never posted
        try:
            moved = await self.reporter.approval_expired(
                RunView.of(view.envelope), view.call.model_copy(update={"decision": decision})
            )
        except Exception:
            log.warning("run %s: expiry of %s not shown yet", run_id, approval_id, exc_info=True)
            return False
        if moved is not None:
            await self.store.set_card_ts(run_id, approval_id, moved)
        return True
