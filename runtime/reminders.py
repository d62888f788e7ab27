"""One reminder per open approval, part-way through its lifetime (`REMINDER_AT`).

Polled from the `reminders` due set; a decision or expiry removes the entry first, so a
reminder only goes out for a call still waiting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runtime.reporter import Reporter, RunView
from runtime.run_store import RunStore

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Reminders:
    store: RunStore
    reporter: Reporter

    async def handle(self, member: str) -> bool:
        run_id, _, approval_id = member.partition(":")
        record, call = await self.store.find_call(run_id, approval_id)
        if record is None or call is None or call.decision is not None:
            return True
        if record.status != "waiting" or call.message_ts is None:
            return True
        try:
            await self.reporter.approval_reminder(RunView.of(record.envelope), call)
        except Exception:
            log.warning("run %s: reminder for %s not sent yet", run_id, approval_id, exc_info=True)
            return False
        return True
