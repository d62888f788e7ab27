"""Copies of a call's card outside its thread: all copies are one approval.

A policy rule's `notify` (and an escalation) sends copies to people's direct messages and to
other channels. Each copy is recorded with the call (field `copies:<id>`, see
`runtime.record.layout`), so that a decision on any copy is accepted by the decision script and
redraws all of them.
"""

from __future__ import annotations

import json
import logging

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.record import scripts as rs
from runtime.record.envelope import Decision, PendingCall
from runtime.record.reads import CopiesRead
from runtime.record.view import read
from runtime.reporter import Reach, RunView

log = logging.getLogger(__name__)


class CardCopies:
    def __init__(self, redis: aioredis.Redis, keys: Keys, reach: Reach) -> None:
        self._redis = redis
        self._keys = keys
        self._reach = reach
        self._add = rs.once(redis, keys, rs.ADD_COPIES)

    async def notify(self, run: RunView, call: PendingCall) -> None:
        """Send the copies the call's rule asks for (`notify`), unless they were sent."""
        view = await read(self._redis, self._keys, CopiesRead, run.run_id, call.approval_id)
        # Absent, or written by another version: its copies are its own business.
        if view.reach is None or view.has_copies:
            return
        if view.reach.notify:
            await self.send(run, call, view.reach.notify)

    async def send(self, run: RunView, call: PendingCall, targets: tuple[str, ...]) -> None:
        """Post copies to `targets` and record them; a copy that lands after the decision is
        redrawn as decided at once."""
        copies = await self._reach.copy_card(run, call, targets)
        if not copies:
            return
        reply = await self._add(
            rs.AddCopies(
                run=self._keys.run(run.run_id),
                approval_id=call.approval_id,
                copies=json.dumps([copy.model_dump() for copy in copies]),
            )
        )
        status = _text(reply[0])
        if status == "decided":
            decision = Decision.model_validate_json(_text(reply[1]))
            late = call.model_copy(update={"decision": decision, "copies": copies})
            await self._reach.redraw_copies(run, late)
        elif status == "gone":
            log.info("run %s: copies of %s posted after it ended", run.run_id, call.approval_id)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
