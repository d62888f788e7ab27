"""How decisions go (issue 21 item 3): `/agent stats` after a known set of decisions made
through Slack, the same figures as metrics, and `python -m runtime stats` as a process."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import with_env
from tests.runtime.decisions.test_edits import open_editor, submit
from tests.runtime.grants.test_grants import granted, run_in
from tests.runtime.process.test_operations import scrape
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import ROOT

SLOW_SECONDS = 1.5
"""How long the slow decisions wait: past `QUICK_APPROVAL_SECONDS` below."""


async def one_call(bot: Harness, task: str) -> tuple[Message, Message]:
    root = await bot.start_run(task)
    [card] = await bot.cards(root, 1)
    return root, card


async def known_decisions(bot: Harness) -> None:
    """Bob approves at once; carol rejects, and bob approves, after `SLOW_SECONDS` each; a
    fourth call expires."""
    bot.model.script = delete_then_answer
    root, card = await one_call(bot, "delete u-1")
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    root, card = await one_call(bot, "delete u-2")
    await asyncio.sleep(SLOW_SECONDS)
    await bot.sender.reject(card, user="UCAROL", reason="not this one")
    await bot.final_answer(root)
    root, card = await one_call(bot, "delete u-3")
    await asyncio.sleep(SLOW_SECONDS)
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)


async def times_to_decide(bot: Harness) -> list[float]:
    """From each `requested` entry to the decision of its call, as the trail says."""
    trail = await bot.audit_until("finished")
    while len([e for e in trail if e["event"] == "finished"]) < 3:
        trail = await bot.audit_until("finished")
    asked = {e["approval_id"]: e["at"] for e in trail if e["event"] == "requested"}
    return [
        e["at"] - asked[e["approval_id"]]
        for e in trail
        if e["event"] in ("approved", "rejected") and e["approval_id"] in asked
    ]


def table(text: str) -> dict[str, list[str]]:
    """The rows of the answer's table, by their first cell."""
    inside = text.split("```")[1]
    return {line.split()[0]: line.split() for line in inside.splitlines()}


@with_env(QUICK_APPROVAL_SECONDS="1")
async def test_stats_after_known_decisions_report_counts_median_and_quick_approvals(
    bot: Harness, tmp_path: Path
) -> None:
    before = await scrape(bot.web_url)
    await known_decisions(bot)
    waits = await times_to_decide(bot)
    assert len(waits) == 3 and sorted(waits)[0] < 1 < sorted(waits)[1]

    status, body = await bot.sender.command("stats")
    assert status == 200 and body["response_type"] == "ephemeral"
    text = body["text"]
    assert text.startswith("*How decisions went in this channel, the last 7 days*")
    rows = table(text)
    heading = ["tool", "asked", "approved", "rejected", "answered", "expired", "stopped"]
    assert rows["tool"][:7] == heading
    delete = rows["delete_user"]
    assert delete[1:7] == ["3", "2", "1", "0", "0", "0"], text
    assert delete[-2:] == ["0", "0"], "no grant used, no edit"
    assert delete[7] == f"{statistics.median(waits):.1f}s"
    assert "Decided most: <@UBOB> 2, <@UCAROL> 1" in text
    assert "Quick approvals (within 1 s of the card appearing): <@UBOB> 1" in text

    _, elsewhere = await bot.sender.command("stats 30", channel="COTHER")
    assert elsewhere["text"] == "No tool call asked anyone in this channel in the last 30 days."
    _, malformed = await bot.sender.command("stats x")
    assert malformed["text"].startswith("`/agent stats` takes a number of days (1 to 365)")
    _, too_far = await bot.sender.command("stats 366")
    assert too_far["text"].startswith("`/agent stats` takes a number of days")
    _, helped = await bot.sender.command("help")
    assert "• `/agent stats [days]`: how decisions went in this channel" in helped["text"]

    after = await scrape(bot.web_url)
    quick = "countersign_quick_approvals_total"
    assert after.value(quick, tool="delete_user") - before.value(quick, tool="delete_user") == 1
    latency = "countersign_decision_latency_seconds_count"
    for outcome, count in (("approved", 2), ("rejected", 1)):
        labels = {"tool": "delete_user", "outcome": outcome}
        assert after.value(latency, **labels) - before.value(latency, **labels) == count

    printed = stats_process(bot, "--chart", str(tmp_path / "decisions.png"))
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert lines[0] == "Channel CGENERAL:"
    assert lines[2].split()[:7] == ["delete_user", "3", "2", "1", "0", "0", "0"]
    assert "  decided most: UBOB 2, UCAROL 1" in lines
    assert "  quick approvals (within 1s): UBOB 1" in lines
    assert (tmp_path / "decisions.png").read_bytes().startswith(b"\x89PNG")
    assert "time to decide of 1 tool(s)" in printed.stderr
    later = stats_process(bot, since="2999-01-01")
    assert later.returncode == 0, later.stderr
    assert later.stdout == "No tool call asked anyone since 2999-01-01T00:00:00+00:00.\n"


@with_env(APPROVAL_TTL_SECONDS="1")
async def test_an_expired_call_is_counted_not_timed(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root, _ = await one_call(bot, "delete u-9")
    await bot.final_answer(root, timeout=20)
    await bot.audit_until("expired")
    _, body = await bot.sender.command("stats 1")
    delete = table(body["text"])["delete_user"]
    assert delete[1:9] == ["1", "0", "0", "0", "1", "0", "-", "-"], body["text"]
    assert "Decided most" not in body["text"]
    assert "Quick approvals (within 5 s of the card appearing): none" in body["text"]


async def test_grants_used_and_edits_are_counted_per_tool(bot: Harness) -> None:
    """Bob approves with a grant (the next call runs without a card), then edits and approves a
    third call's arguments in another channel, which the grant does not cover."""
    bot.model.script = delete_then_answer
    await granted(bot, "delete_user in #general for 1 hour")
    second = await run_in(bot, "delete u-100 again")
    await bot.final_answer(second)
    await bot.audit_until("grant_used")
    root = await run_in(bot, "delete u-7", channel="COTHER")
    [card] = await bot.cards(root, 1)
    modal = await open_editor(bot, card, user="UBOB")
    await submit(bot, modal, '{"user_id": "u-8"}', user="UBOB")
    await bot.final_answer(root)
    await bot.audit_until("edited")

    _, here = await bot.sender.command("stats")
    delete = table(here["text"])["delete_user"]
    assert delete[1:3] == ["1", "1"] and delete[-2:] == ["1", "0"], here["text"]
    _, there = await bot.sender.command("stats", channel="COTHER")
    delete = table(there["text"])["delete_user"]
    assert delete[1:3] == ["1", "1"] and delete[-2:] == ["0", "1"], there["text"]


def stats_process(
    bot: Harness, *more: str, since: str | None = None
) -> subprocess.CompletedProcess[str]:
    yesterday = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).date().isoformat()
    environ: dict[str, Any] = {
        **os.environ,
        "REDIS_URL": bot.redis_url,
        "REDIS_KEY_PREFIX": bot.prefix,
        "QUICK_APPROVAL_SECONDS": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "runtime", "stats", "--since", since or yesterday, *more],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
