"""What a call was, kept in the trail, and `python -m runtime policy backtest` replaying it
against a proposed policy (issue 21 items 1 and 2): decisions made through Slack, then the
command run as a process on the trail they wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from runtime.audit.trail import AuditTrail
from runtime.calls.digest import call_digest
from runtime.db.keys import Keys
from tests.conftest import with_env
from tests.runtime.grants.test_grants import granted, run_in
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import ROOT

BLOCK_DELETES = """
# A proposal: nobody deletes users any more.
[[rule]]
tool = "delete_*"
auto = "reject"

[[rule]]
tool = "restart_*"
approvers = ["S0SRE"]
quorum = 2
"""


def policy(
    bot: Harness, path: Path, *args: str, text: str = BLOCK_DELETES
) -> subprocess.CompletedProcess[str]:
    path.write_text(text)
    environ = {**os.environ, "REDIS_URL": bot.redis_url, "REDIS_KEY_PREFIX": bot.prefix}
    if bot.cluster:
        environ["REDIS_CLUSTER"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "runtime", "policy", *args[:1], str(path), *args[1:]],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def backtest_json(redis_url: str, prefix: str, path: Path) -> subprocess.CompletedProcess[str]:
    path.write_text(BLOCK_DELETES)
    return subprocess.run(
        [sys.executable, "-m", "runtime", "policy", "backtest", str(path), "--json"],
        cwd=ROOT,
        env={**os.environ, "REDIS_URL": redis_url, "REDIS_KEY_PREFIX": prefix},
        capture_output=True,
        text=True,
        timeout=60,
    )


def lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


async def approved_and_rejected(bot: Harness) -> None:
    """Two runs asking to delete u-100: bob approves the first, carol rejects the second."""
    bot.model.script = delete_then_answer
    first = await bot.start_run("delete u-100")
    [card] = await bot.cards(first, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(first)
    second = await bot.start_run("delete u-100")
    [card] = await bot.cards(second, 1)
    await bot.sender.reject(card, user="UCAROL", reason="not this one")
    await bot.final_answer(second)
    await bot.slack.wait_for(
        lambda: len([m for m in bot.slack.roots() if m.text]) >= 2, what="two runs"
    )


async def finished_twice(bot: Harness) -> list[dict[str, Any]]:
    trail = await bot.audit_until("finished")
    while len([e for e in trail if e["event"] == "finished"]) < 2:
        trail = await bot.audit_until("finished")
    return trail


async def test_a_backtest_reports_each_past_call_that_the_proposal_would_block(
    bot: Harness, tmp_path: Path
) -> None:
    await approved_and_rejected(bot)
    trail = await finished_twice(bot)

    # The trail kept what was asked: the digest can be checked against it.
    asked = [e for e in trail if e["event"] == "requested"]
    assert [e["arguments"] for e in asked] == ['{"user_id": "u-100"}'] * 2
    assert all(e["digest"] == call_digest("delete_user", e["arguments"]) for e in asked)

    found = lines(policy(bot, tmp_path / "proposal.toml", "backtest", "--json"))
    assert len({c["run_id"] for c in found}) == 2
    assert [(c["was"], c["decided_by"], c["would"]) for c in found] == [
        ("approved", ["UBOB"], "auto_reject"),
        ("rejected", ["UCAROL"], "auto_reject"),
    ]
    where = f"{tmp_path / 'proposal.toml'}:3"
    for call, request in zip(found, asked, strict=True):
        assert call["call_id"] == "call_del" and call["tool"] == "delete_user"
        assert call["agent"] == request["agent"] and call["channel"] == request["channel"]
        assert call["requester"] == "UALICE" and call["args_digest"] == request["digest"]
        assert call["rule"] == where and call["changes"] == ["blocked"]
        assert call["arguments_kept"] is True and "arguments_note" not in call

    summary = policy(bot, tmp_path / "proposal.toml", "backtest")
    assert summary.returncode == 0, summary.stderr
    assert "2 past call(s)" in summary.stdout
    [blocked] = [line for line in summary.stdout.splitlines() if "would be blocked" in line]
    assert blocked.split()[3:] == ["2", "(were:", "1", "approved,", "1", "rejected)"]
    assert f"2  delete_user (ops): was approved, would auto-reject  [{where}]" not in summary.stdout
    assert f"1  delete_user (ops): was approved, would auto-reject  [{where}]" in summary.stdout
    assert "2 call(s) replayed" in summary.stderr

    # Nothing in the range: an empty report, still exit 0.
    later = lines(
        policy(bot, tmp_path / "proposal.toml", "backtest", "--json", "--since", "2999-01-01")
    )
    assert later == []
    today = found[0]["at"][:10]
    before = policy(bot, tmp_path / "proposal.toml", "backtest", "--json", "--until", today)
    assert len(lines(before)) == 2, "--until a day reaches to its end"


async def test_the_same_policy_as_the_trail_changes_nothing(bot: Harness, tmp_path: Path) -> None:
    await approved_and_rejected(bot)
    await finished_twice(bot)
    done = policy(bot, tmp_path / "same.toml", "backtest", "--json", text="")
    found = lines(done)
    assert [(c["would"], c["rule"], c["changes"]) for c in found] == [("ask", None, [])] * 2


async def test_a_bad_policy_file_exits_2_with_its_line(bot: Harness, tmp_path: Path) -> None:
    bad = '[[rule]]\ntool = "delete_*"\nquorum = 0\n'
    done = policy(bot, tmp_path / "bad.toml", "backtest", text=bad)
    assert done.returncode == 2 and done.stdout == ""
    assert "line 3" in done.stderr and "quorum" in done.stderr


@with_env(AUDIT_ARGS_MAX_BYTES="10")
async def test_arguments_too_long_to_keep_leave_the_digest_and_say_so(
    bot: Harness, tmp_path: Path
) -> None:
    await approved_and_rejected(bot)
    trail = await finished_twice(bot)
    asked = [e for e in trail if e["event"] == "requested"]
    assert all("arguments" not in e and e["arguments_omitted"] == "too_long" for e in asked)
    assert {e["arguments_bytes"] for e in asked} == {len('{"user_id": "u-100"}')}
    found = lines(policy(bot, tmp_path / "proposal.toml", "backtest", "--json"))
    assert [c["arguments_kept"] for c in found] == [False, False]
    assert found[0]["arguments_note"] == "too long to keep (20 bytes)"
    assert [c["would"] for c in found] == ["auto_reject"] * 2, "judged on tool and agent"
    summary = policy(bot, tmp_path / "proposal.toml", "backtest")
    assert "2 without their arguments in the trail" in summary.stdout


@with_env(AUDIT_ARGS="off")
async def test_audit_args_off_keeps_digests_only(bot: Harness) -> None:
    await approved_and_rejected(bot)
    trail = await finished_twice(bot)
    asked = [e for e in trail if e["event"] == "requested"]
    assert len(asked) == 2
    assert all("arguments" not in e and "arguments_omitted" not in e for e in asked)
    assert all(len(e["digest"]) == 64 for e in asked)


async def test_quorum_counts_and_a_stop_are_read_as_the_calls_outcome(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    """Written by the audit writer as the scripts write them: an approval counted towards a
    quorum is not yet the outcome; a stop closes the run's open calls."""
    redis = aioredis.Redis.from_url(redis_url)
    trail = AuditTrail(redis, Keys(prefix))
    asked = {"tool": "restart_service", "agent": "ops", "requester": "UALICE", "channel": "C1"}
    try:
        for run, approval in (("r1", "a1"), ("r2", "a2")):
            await trail.record(
                "requested",
                run,
                approval_id=approval,
                call_id=f"c-{approval}",
                digest="d",
                quorum=2,
                approvers="U0SRE,U0OPS",
                arguments="{}",
                **asked,
            )
        await trail.record(
            "approved", "r1", approval_id="a1", user_id="U0SRE", approvals=1, quorum=2
        )
        await trail.record(
            "approved", "r1", approval_id="a1", user_id="U0OPS", approvals=2, quorum=2
        )
        await trail.record(
            "approved", "r2", approval_id="a2", user_id="U0SRE", approvals=1, quorum=2
        )
        await trail.record("stopped", "r2", user_id="UALICE")
    finally:
        await redis.aclose()
    found = lines(backtest_json(redis_url, prefix, tmp_path / "proposal.toml"))
    assert [(c["run_id"], c["was"], c["decided_by"]) for c in found] == [
        ("r1", "approved", ["U0SRE", "U0OPS"]),
        ("r2", "stopped", ["UALICE"]),
    ]
    # The proposal asks the group S0SRE where U0SRE and U0OPS could decide: other approvers.
    assert found[0]["approvers"] == ["S0SRE"] and found[0]["quorum"] == 2
    assert found[0]["changes"] == ["approvers"]


async def test_a_grants_use_keeps_the_arguments_and_is_replayed_as_granted(
    bot: Harness, tmp_path: Path
) -> None:
    bot.model.script = delete_then_answer
    await granted(bot, "delete_user in #general for 1 hour")
    second = await run_in(bot, "delete u-100 again")
    assert (await bot.final_answer(second)).text == "done: deleted u-100"
    trail = await bot.audit_until("grant_used")
    [used] = [e for e in trail if e["event"] == "grant_used"]
    assert used["arguments"] == '{"user_id": "u-100"}'
    assert used["digest"] == call_digest("delete_user", used["arguments"])

    found = lines(policy(bot, tmp_path / "proposal.toml", "backtest", "--json"))
    assert [(c["was"], c["decided_by"], c["would"]) for c in found] == [
        ("approved", ["UBOB"], "auto_reject"),
        ("granted", ["UBOB"], "auto_reject"),
    ]


async def test_a_call_the_policy_approved_keeps_its_arguments_and_would_now_ask(
    bot: Harness, tmp_path: Path
) -> None:
    automatic = tmp_path / "now.toml"
    automatic.write_text('[[rule]]\ntool = "delete_user"\nauto = "approve"\n')
    await bot.stop_workers()
    await bot.start_worker(POLICY_FILE=str(automatic))
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    trail = await bot.audit_until("finished")
    [auto] = [e for e in trail if e["event"] == "auto_approved"]
    assert auto["arguments"] == '{"user_id": "u-100"}'

    [call] = lines(policy(bot, tmp_path / "empty.toml", "backtest", "--json", text=""))
    assert (call["was"], call["would"], call["changes"]) == ("auto_approved", "ask", ["asks"])
    summary = policy(bot, tmp_path / "proposal.toml", "backtest")
    assert "would be blocked" in summary.stdout
    [blocked] = [line for line in summary.stdout.splitlines() if "would be blocked" in line]
    assert blocked.split()[3:] == ["1", "(were:", "1", "approved", "by", "policy)"]


@with_env(APPROVERS="UALICE,UBOB,UCAROL", POLICY_FILE="bot/console/demo_policy.toml")
async def test_the_demo_policy_replayed_with_its_approvers_changes_nothing(bot: Harness) -> None:
    """The README's tour ends with this backtest: the demo's own policy, its own approvers."""
    await approved_and_rejected(bot)
    await finished_twice(bot)
    done = demo_backtest(bot)
    assert done.returncode == 0, done.stderr
    assert "2 past call(s)" in done.stdout
    assert "  unchanged" in done.stdout and done.stdout.rstrip().endswith("2"), done.stdout


def demo_backtest(bot: Harness) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", "policy", "backtest", "bot/console/demo_policy.toml"],
        cwd=ROOT,
        env={
            **os.environ,
            "REDIS_URL": bot.redis_url,
            "REDIS_KEY_PREFIX": bot.prefix,
            "APPROVERS": "UALICE,UBOB,UCAROL",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
