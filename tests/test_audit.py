"""Proof of who approved what: the audit trail, `/agent audit`, and the JSON-lines export."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Harness
from tests.model_scripts import delete_then_answer
from tests.processes import ROOT

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
    environ = {**os.environ, "REDIS_URL": bot.redis_url, "REDIS_KEY_PREFIX": bot.prefix}
    done = subprocess.run(
        [sys.executable, "-m", "runtime", "audit", "--since", since],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "audit event(s) exported" in done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


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

    assert export(bot, "2999-01-01") == []


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
