"""What a waiting run's status message should say after one of its calls was decided while
others still wait ("Waiting for 1 of 2 approvals"): read by whoever recorded the decision, since
the worker is not working on the run until its last call is decided."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.record import layout as rr
from runtime.record.envelope import UnreadableEnvelope, parse_envelope
from runtime.reporter import Activity, RunView


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitingStatus:
    run: RunView
    message_id: str
    activity: Activity


async def waiting_status(redis: aioredis.Redis, keys: Keys, run_id: str) -> WaitingStatus | None:
    """The status of `run_id` while it still waits for some of its calls; None once it does
    not (resuming, finished, stopped) or when this version cannot read its record."""
    raw: Any = await redis.hgetall(keys.run(run_id))
    fields = {name.decode(): value for name, value in raw.items()}
    status, message_id = fields.get(rr.STATUS), fields.get(rr.STATUS_MESSAGE)
    if status != b"waiting" or message_id is None or rr.ENVELOPE not in fields:
        return None
    try:
        envelope = parse_envelope(run_id, fields[rr.ENVELOPE])
    except UnreadableEnvelope:
        return None
    open_tools = tuple(
        call.tool
        for call in envelope.calls
        if call.decision is None and rr.DECISION + call.approval_id not in fields
    )
    if not open_tools:
        return None
    activity = Activity(
        steps=tuple(json.loads(fields.get(rr.STATUS_STEPS) or b"[]")),
        state="waiting",
        waiting_for=open_tools,
        approvals_asked=len(envelope.calls),
    )
    return WaitingStatus(
        run=RunView.of(envelope), message_id=message_id.decode(), activity=activity
    )
