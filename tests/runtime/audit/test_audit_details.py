"""What the audit trail and the log say of a tool's output: JSON in the trail whatever the tool
returned, and nothing of it in the log when the trail cannot be written."""

from __future__ import annotations

import json
import logging

import pytest
import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.db.keys import Keys
from runtime.db.local import free_port
from tests.runtime.mcp.test_mcp import audit_events, start
from tests.support.deployment import Deployment


async def test_an_mcp_calls_outcome_in_the_audit_trail_is_json(deployment: Deployment) -> None:
    card = await start(deployment)
    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(deployment.slack.roots()[-1])
    assert answer.text == "done: dropped orders"
    [executed] = [e for e in await audit_events(deployment) if e["event"] == "executed"]
    # The SDK hands an MCP tool's text back as a content part, not as a string.
    assert json.loads(executed["outcome"]) == {"type": "text", "text": "dropped orders"}


async def test_an_audit_entry_redis_refuses_is_logged_by_its_ids_never_its_output(
    caplog: pytest.LogCaptureFixture,
) -> None:
    nowhere = aioredis.Redis(port=free_port(), socket_connect_timeout=0.2)
    audit = AuditTrail(nowhere, Keys("csaudit:"))
    try:
        with caplog.at_level(logging.WARNING, logger="runtime.audit.trail"):
            await audit.record(
                AuditEvent.REPLAYED,
                "r0000000000000001",
                call_id="call_del",
                tool="delete_user",
                outcome="password=hunter2",
            )
    finally:
        await nowhere.aclose()
    [line] = [r.getMessage() for r in caplog.records if r.name == "runtime.audit.trail"]
    assert line == (
        "run r0000000000000001: audit entry replayed (call_id call_del) not stored "
        "(ConnectionError: Redis unreachable)"
    )
    assert "hunter2" not in caplog.text
