"""Proof of who approved what: the audit trail, `/agent audit`, and the JSON-lines export."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from runtime.db.local import free_port
from tests.conftest import on_cluster_too
from tests.runtime.audit.test_audit_retention import run_export
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import ROOT, Process, wait_until_healthy

POLICY = """
[[rule]]
tool = "delete_*"
approvers = ["S0SRE"]
quorum = 2
"""


@pytest.fixture
def env_overrides(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path)}


def export(bot: Harness, since: str) -> list[dict[str, Any]]:
    cluster = {"REDIS_CLUSTER": "true"} if bot.cluster else {}
    done = run_export(bot.redis_url, bot.prefix, since, **cluster)
    assert "audit event(s) exported" in done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@on_cluster_too
async def test_a_group_with_quorum_two_an_outsider_and_the_export(bot: Harness) -> None:
    """The issue's 'done when': the export shows all three clicks with the same digest."""
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL", "UDAVE"]}
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)

    await bot.sender.click(card, "approve", user="UEVE")
    await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="refusal")
    assert "Only @sre may decide" in bot.slack.ephemerals[0]["text"]
    await bot.sender.click(card, "approve", user="UCAROL")
    await bot.slack.wait_for(lambda: "1 of 2 approvals" in card.all_text(), what="1 of 2")
    await bot.sender.click(card, "approve", user="UDAVE")
    await bot.final_answer(root)
    await bot.audit_until("finished")

    today = dt.datetime.now(dt.UTC).date().isoformat()
    events = export(bot, today)
    clicks = [e for e in events if e["event"] in ("denied", "approved")]
    assert [(e["event"], e["details"]["user_id"]) for e in clicks] == [
        ("denied", "UEVE"),
        ("approved", "UCAROL"),
        ("approved", "UDAVE"),
    ]
    digests = {e["details"]["digest"] for e in clicks}
    [executed] = [e for e in events if e["event"] == "executed"]
    assert digests == {executed["details"]["digest"]}
    assert all(e["details"]["requester"] == "UALICE" for e in clicks)
    assert all(e["run_id"] == events[0]["run_id"] for e in events)
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    for event in events:  # ISO 8601 with its zone, as logs write a time
        assert abs(dt.datetime.fromisoformat(event["time"]).timestamp() - event["at"]) < 0.001
        assert event["time"].endswith("+00:00")

    assert export(bot, "2999-01-01") == []


@on_cluster_too
async def test_agent_audit_shows_this_channels_events_and_one_runs_history(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL"]}
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.sender.reject(card, user="UCAROL", reason="not today")
    await bot.final_answer(root)
    await bot.audit_until("finished")

    status, body = await bot.sender.command("audit")
    assert status == 200 and body["response_type"] == "ephemeral"
    assert "*rejected* `delete_user` by <@UCAROL> (not today)" in body["text"]
    assert "*requested* `delete_user`" in body["text"]

    _, elsewhere = await bot.sender.command("audit", channel="COTHER")
    assert elsewhere["text"] == "No audit events here yet."

    runs = {line.split("run `")[1].split("`")[0] for line in body["text"].splitlines()[1:]}
    [run] = runs
    _, history = await bot.sender.command(f"audit {run}")
    assert history["text"].startswith(f"*Audit: run `{run}`*")
    _, hidden = await bot.sender.command(f"audit {run}", channel="COTHER")
    assert "No audit events of run" in hidden["text"]


async def test_the_documented_export_works_after_the_demo(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    [command] = [line for line in operations.splitlines() if "-m runtime audit --demo" in line]
    env = {
        "PORT": str(free_port()),
        "REDIS_URL": redis_url,
        "REDIS_KEY_PREFIX": prefix,
        "OPENAI_API_KEY": "",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    demo = Process("demo", "python -m bot demo", env, tmp_path)
    url = f"http://127.0.0.1:{env['PORT']}"
    try:
        await wait_until_healthy(f"{url}/healthz", demo)
        async with aiohttp.ClientSession() as session:
            intent = {"user": "UALICE", "kind": "command", "command": "/agent"}
            page = {"Origin": url}  # the console takes intents from its own page only
            typed = {**intent, "text": "delete u-100"}
            await session.post(f"{url}/console/intents", json=typed, headers=page)
            card = await next_snapshot(session, url, _approve_button)
            click = {"user": "UBOB", "kind": "click", "message_ts": card, "action_id": "approve"}
            await session.post(f"{url}/console/intents", json=click, headers=page)
            await next_snapshot(session, url, _answered)
    finally:
        demo.signal(signal.SIGINT)
        assert await demo.wait(timeout=30) == 0, demo.log()

    out = tmp_path / "audit.jsonl"
    shell = command.replace(".venv/bin/python", sys.executable).replace("audit.jsonl", str(out))
    done = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", shell, cwd=ROOT, env={**os.environ, **env}
    )
    assert await asyncio.wait_for(done.wait(), timeout=60) == 0
    events = [json.loads(line)["event"] for line in out.read_text().splitlines()]
    assert {"started", "requested", "approved", "executed", "finished"} <= set(events)


async def next_snapshot(
    session: aiohttp.ClientSession, url: str, found: Callable[[dict[str, Any]], Any]
) -> Any:
    """The console's stream, read until `found` returns something."""
    async with asyncio.timeout(20), session.get(f"{url}/console/stream") as response:
        async for line in response.content:
            if line.startswith(b"data: ") and (value := found(json.loads(line[6:]))):
                return value
    raise AssertionError("the console's stream ended")


def _approve_button(snapshot: dict[str, Any]) -> str | None:
    for message in snapshot["messages"]:
        for block in message["blocks"]:
            if any(e.get("action_id") == "approve" for e in block.get("elements", [])):
                return str(message["ts"])
    return None


def _answered(snapshot: dict[str, Any]) -> bool:
    return any(m["text"].startswith("Scripted model") for m in snapshot["messages"])
