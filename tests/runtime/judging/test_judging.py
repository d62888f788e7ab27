"""Every call meets the policy in one place, carded or not: Approve always, grants and automatic
rules are judged on the exact call, on the values its tool receives; a rule that cannot be
judged never makes a call easier; an edit is judged like a new call; nothing stands in for a
person on the calls of a run an outsider started. On the real web app and worker, with signed
Slack requests and a fake model."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import RunState

from runtime.calls.digest import call_digest
from runtime.jobs.contracts import Conversation, StartJob, new_run_id
from runtime.jobs.queue import JobQueue
from tests.runtime.deciders.test_approvers import ephemeral_for
from tests.runtime.deciders.test_confirm import open_confirmation, typed
from tests.runtime.decisions.test_edits import open_editor, submit
from tests.runtime.grants.test_grants import grant_options
from tests.runtime.review.test_backtest import lines, policy
from tests.support import agents, judged_agents
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness

POLICY = """
[[rule]]
name = "production tables"
tool = "drop_table"
when = "args.name.startsWith('prod_')"
auto = "reject"

[[rule]]
name = "forced drops"
tool = "drop_table"
when = "has(args.force) && args.force == true"
confirm = "name"

[[rule]]
tool = "drop_table"
anyone = true

[[rule]]
name = "small refunds"
tool = "refund_order"
when = "args.amount_cents <= 10000"
anyone = true

[[rule]]
name = "refunds over $1,000"
tool = "refund_order"
when = "args.amount_cents > 100000"
approvers = ["UALICE"]

[[rule]]
tool = "refund_order"
approvers = ["UALICE", "UBOB"]

[[rule]]
name = "forced purges"
tool = "purge_cache"
when = "has(args.force) && args.force == true"
auto = "reject"

[[rule]]
name = "EU purges"
tool = "purge_cache"
when = "args.region.startsWith('eu')"
approvers = ["UCAROL"]

[[rule]]
tool = "purge_cache"
approvers = ["UBOB", "UDAVE"]
"""


@pytest.fixture(autouse=True)
def general(bot: Harness) -> None:
    bot.slack.channels["CGENERAL"] = "general"  # the grant menu names the channel


@pytest.fixture
def env_overrides(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path), "AGENTS": "tests.support.judged_agents:REGISTRY"}


def calls_in_turns(*turns: list[tuple[str, dict[str, Any], str]]) -> Callable[..., list[Item]]:
    """A model that asks for each turn's calls once the previous turn's were answered, then
    answers with every tool output it was told, one per line."""

    def script(request: ModelRequest) -> list[Item]:
        told = request.tool_outputs
        for turn in turns:
            if not all(call_id in told for _tool, _args, call_id in turn):
                return [tool_call(tool, args, call_id) for tool, args, call_id in turn]
        return [message("\n".join(f"{k}: {v}" for k, v in sorted(told.items())))]

    return script


def ran(tool: str) -> list[dict[str, Any]]:
    return [arguments for name, arguments in agents.EXECUTIONS if name == tool]


def of_call(trail: list[dict[str, Any]], call_id: str) -> list[str]:
    """The audit events of one tool call, in order."""
    return [e["event"] for e in trail if e.get("call_id") == call_id]


def status_text(bot: Harness, root: Message) -> str:
    return "\n".join(m.text for m in bot.slack.status_messages(root.ts))


# --- 1. Approve always is a permission of the run, bound to the rule --------------------------


async def test_approve_always_covers_only_later_calls_under_the_same_rule(
    bot: Harness, tmp_path: Path
) -> None:
    bot.model.script = calls_in_turns(
        [("drop_table", {"name": "tmp_a"}, "c1")],
        [("drop_table", {"name": "prod_users"}, "c2")],
        [("drop_table", {"name": "tmp_b"}, "c3")],
        [("drop_table", {"name": "users", "force": True}, "c4")],
    )
    root = await bot.start_run("drop the temporary tables")
    [first] = await bot.cards(root, 1)
    await bot.sender.click(first, "approve_always", user="UBOB")

    # prod_users falls under an automatic rejection: rejected, not run, no card.
    # tmp_b falls under the same rule as tmp_a: approved by bob's Approve always, no card.
    # The forced drop asks its own typed confirmation: a card, whatever bob pressed before.
    [_, forced] = await bot.cards(root, 2)
    assert forced.action_ids() == ["approve_typed", "reject", "answer"], forced.all_text()
    assert ran("drop_table") == [
        {"name": "tmp_a", "force": False},
        {"name": "tmp_b", "force": False},
    ]
    told = bot.model.requests[-1].tool_outputs
    assert told["c2"].startswith("The call to drop_table was not run: the approval policy")
    assert told["c3"] == "dropped tmp_b"

    trail = await bot.audit_until("requested")
    assert of_call(trail, "c2") == ["auto_rejected"]
    assert of_call(trail, "c3") == ["approved", "executed"], "audited before it ran"
    [always] = [e for e in trail if e["event"] == "approved" and e["call_id"] == "c3"]
    assert (always["user_id"], always["via"]) == ("UBOB", "always")
    assert always["digest"] == call_digest("drop_table", '{"name": "tmp_b"}')
    [executed] = [e for e in trail if e["event"] == "executed" and e["call_id"] == "c3"]
    assert executed["digest"] == always["digest"]
    assert "`drop_table` approved by <@UBOB>'s Approve always" in status_text(bot, root)
    _status, listing = await bot.sender.command("status")
    assert "Approve always: `drop_table` by <@UBOB>" in json.dumps(listing), listing

    await typed(bot, await open_confirmation(bot, forced, user="UCAROL"), "users", user="UCAROL")
    await bot.final_answer(root)
    assert ran("drop_table")[-1] == {"name": "users", "force": True}
    # The trail's reviews know the call an Approve always approved without asking.
    found = lines(policy(bot, tmp_path / "same.toml", "backtest", "--json", text=POLICY))
    assert {c["call_id"]: c["was"] for c in found} == {
        "c1": "approved",
        "c2": "auto_rejected",
        "c3": "always",
        "c4": "approved",
    }


async def test_approve_always_covers_a_call_waiting_beside_it_under_the_same_rule(
    bot: Harness,
) -> None:
    bot.model.script = calls_in_turns(
        [
            ("drop_table", {"name": "tmp_a"}, "c1"),
            ("drop_table", {"name": "tmp_b"}, "c2"),
            ("drop_table", {"name": "logs", "force": True}, "c3"),
        ]
    )
    root = await bot.start_run("drop three tables")
    first, second, forced = await bot.cards(root, 3)
    await bot.sender.click(first, "approve_always", user="UBOB")

    await bot.slack.wait_for(
        lambda: "<@UBOB> approved" in second.all_text(), what="the second card decided"
    )
    assert "approve" not in second.action_ids()
    assert forced.action_ids() == ["approve_typed", "reject", "answer"], (
        "its own rule: still asking"
    )
    trail = await bot.audit_until("approved")
    [beside] = [e for e in trail if e["event"] == "approved" and e["call_id"] == "c2"]
    assert (beside["via"], beside["user_id"]) == ("always", "UBOB")
    assert agents.EXECUTIONS == [], "nothing runs before the forced drop is decided"

    await typed(bot, await open_confirmation(bot, forced, user="UBOB"), "logs", user="UBOB")
    await bot.final_answer(root)
    assert sorted(a["name"] for a in ran("drop_table")) == ["logs", "tmp_a", "tmp_b"]
    assert len([r for r in bot.model.requests if r.tool_outputs]) == 1, "resumed once"


async def test_approve_always_does_not_cover_the_same_tool_of_another_agent(
    bot: Harness,
) -> None:
    def script(request: ModelRequest) -> list[Item]:
        told = request.tool_outputs
        if "c1" not in told:
            return [tool_call("drop_table", {"name": "tmp_a"}, "c1")]
        if "hand" not in told:
            return [tool_call("transfer_to_janitor", {}, "hand")]
        if "c2" not in told:
            return [tool_call("drop_table", {"name": "tmp_b"}, "c2")]
        return [message("done")]

    bot.model.script = script
    root = await bot.start_run("drop tmp_a, then let the janitor drop tmp_b")
    [first] = await bot.cards(root, 1)
    await bot.sender.click(first, "approve_always", user="UBOB")
    [_, janitors] = await bot.cards(root, 2)
    assert "*janitor*" in janitors.all_text()
    assert ran("drop_table") == [{"name": "tmp_a", "force": False}]


# --- 2. Rules judge the values the tool receives ----------------------------------------------


async def test_a_grant_does_not_cover_a_forced_drop_sent_as_a_string(bot: Harness) -> None:
    bot.model.script = calls_in_turns([("drop_table", {"name": "tmp_a"}, "c1")])
    root = await bot.start_run("drop tmp_a")
    [card] = await bot.cards(root, 1)
    await bot.sender.choose_grant(
        card, grant_options(card)["drop_table in #general for 1 hour"], user="UBOB"
    )
    await bot.final_answer(root)

    # pydantic hands the tool `force=True`: the rule for forced drops judges that.
    bot.model.script = calls_in_turns([("drop_table", {"name": "users", "force": "true"}, "c2")])
    second = await bot.start_run("drop users, forced")
    [forced] = await bot.cards(second, 1)
    assert forced.action_ids() == ["approve_typed", "reject", "answer"], (
        "the typed confirmation asks"
    )
    assert "Rule: forced drops" in forced.all_text()
    assert '\\"force\\": true' in forced.all_text(), "the card shows what the tool receives"
    assert ran("drop_table") == [{"name": "tmp_a", "force": False}]
    trail = await bot.audit_until("requested")
    assert "grant_used" not in of_call(trail, "c2")
    [asked] = [e for e in trail if e["event"] == "requested" and e["call_id"] == "c2"]
    assert asked["digest"] == call_digest("drop_table", '{"name": "users", "force": true}')


async def test_an_amount_sent_as_a_string_is_judged_as_the_number_the_tool_gets(
    bot: Harness,
) -> None:
    bot.model.script = calls_in_turns(
        [("refund_order", {"order_id": "o-1", "amount_cents": "150000"}, "c1")]
    )
    root = await bot.start_run("refund o-1 1500.00", user="UCAROL")
    [card] = await bot.cards(root, 1)
    assert "Rule: refunds over $1,000" in card.all_text(), card.all_text()
    await bot.sender.click(card, "approve", user="UBOB")
    assert "Only UALICE may decide" in await ephemeral_for(bot, "UBOB")
    await bot.sender.click(card, "approve", user="UALICE")
    await bot.final_answer(root)
    assert ran("refund_order") == [{"order_id": "o-1", "amount_cents": 150000}]
    trail = await bot.audit_until("executed")
    [asked] = [e for e in trail if e["event"] == "requested"]
    [executed] = [e for e in trail if e["event"] == "executed"]
    assert asked["digest"] == executed["digest"], "the approved digest is the one that ran"


async def test_arguments_the_tool_refuses_are_named_and_nothing_stands_in_for_a_person(
    bot: Harness,
) -> None:
    bot.model.script = calls_in_turns(
        [("refund_order", {"order_id": "o-1", "amount_cents": "lots"}, "c1")]
    )
    root = await bot.start_run("refund o-1 lots", user="UCAROL")
    [card] = await bot.cards(root, 1)
    text = card.all_text()
    assert "do not fit" in text and "`amount_cents`" in text, text
    assert card.action_ids() == ["approve", "approve_note", "reject", "answer"], (
        "no Approve always, no grant"
    )
    assert not grant_options(card)
    trail = await bot.audit_until("requested")
    [asked] = [e for e in trail if e["event"] == "requested"]
    assert asked["invalid"].startswith("`amount_cents`: Input should be a valid integer")
    await bot.sender.reject(card, user="UALICE", reason="not a number")
    await bot.final_answer(root)
    assert ran("refund_order") == []


# --- 3. A rule that cannot be judged never makes a call easier ---------------------------------


async def test_a_comparison_of_different_types_is_not_quietly_false(bot: Harness) -> None:
    # A hand-written tool receives the model's text as it is: "true" stays a string.
    bot.model.script = calls_in_turns([("purge_cache", {"region": "us"}, "c1")])
    root = await bot.start_run("purge us")
    [card] = await bot.cards(root, 1)
    await bot.sender.choose_grant(
        card, grant_options(card)["purge_cache in #general for 1 hour"], user="UBOB"
    )
    await bot.final_answer(root)

    bot.model.script = calls_in_turns([("purge_cache", {"region": "us", "force": "true"}, "c2")])
    second = await bot.start_run("purge us, forced")
    answer = await bot.final_answer(second)
    assert "c2: The call to purge_cache was not run" in answer.text, answer.text
    assert ran("purge_cache") == [{"region": "us"}], "the grant did not run it"
    trail = await bot.audit_until("auto_rejected")
    [rejected] = [e for e in trail if e["event"] == "auto_rejected"]
    assert rejected["unjudged"] == "forced purges: it compares a string with a boolean"


async def test_an_unjudged_rule_and_the_next_must_both_allow_the_approver(
    bot: Harness, tmp_path: Path
) -> None:
    # EU purges (carol) cannot be judged on a region that is no string; the next rule allows
    # bob and dave: nobody may approve under both, and the model reads why.
    bot.model.script = calls_in_turns([("purge_cache", {"region": 7}, "c1")])
    root = await bot.start_run("purge region 7")
    answer = await bot.final_answer(root)
    assert (
        "No person may approve it under the rules it may fall under: no approver is allowed by both"
        in answer.text
    ), answer.text
    assert "EU purges could not be judged" in answer.text
    assert ran("purge_cache") == []

    # The small-refund rule cannot be judged on a string amount; with the next rules, only
    # alice may approve. The card says which rule could not be judged, and why.
    bot.model.script = calls_in_turns(
        [("refund_order", {"order_id": "o-2", "amount_cents": "lots"}, "c2")]
    )
    second = await bot.start_run("refund o-2", user="UCAROL")
    [card] = await bot.cards(second, 1)
    text = card.all_text()
    assert "Could not be judged: small refunds (it compares" in text, text
    await bot.sender.click(card, "approve", user="UBOB")
    assert "Only UALICE may decide" in await ephemeral_for(bot, "UBOB")
    trail = await bot.audit_until("requested")
    [asked] = [e for e in trail if e["event"] == "requested" and e["call_id"] == "c2"]
    assert asked["approvers"] == "UALICE"
    assert asked["unjudged"].startswith("small refunds: it compares or combines")

    # The backtest reports it the same way.
    found = lines(policy(bot, tmp_path / "same.toml", "backtest", "--json", text=POLICY))
    [replayed] = [c for c in found if c["call_id"] == "c2"]
    assert replayed["approvers"] == ["UALICE"]
    assert replayed["unjudged"][0].endswith("it compares or combines values of different types")


async def test_a_when_over_its_size_budget_cannot_be_judged(bot: Harness) -> None:
    name = "prod_" + "x" * 70_000  # past what a `when` reads: the rejection rule cannot judge
    bot.model.script = calls_in_turns([("drop_table", {"name": name}, "c1")])
    root = await bot.start_run("drop a long table")
    answer = await bot.final_answer(root)
    assert "c1: The call to drop_table was not run" in answer.text
    trail = await bot.audit_until("auto_rejected")
    [rejected] = [e for e in trail if e["event"] == "auto_rejected"]
    assert "characters long, more than the 65,536 a `when` reads" in rejected["unjudged"]
    assert ran("drop_table") == []


# --- 4. An edit is judged like a new call -----------------------------------------------------


async def test_an_edit_into_a_forced_drop_asks_for_the_typed_name(bot: Harness) -> None:
    bot.model.script = calls_in_turns([("drop_table", {"name": "users", "force": False}, "c1")])
    root = await bot.start_run("drop users")
    [card] = await bot.cards(root, 1)
    modal = await open_editor(bot, card, user="UBOB")
    assert await submit(bot, modal, '{"name": "users", "force": true}', user="UBOB") == {}
    told = await ephemeral_for(bot, "UBOB")
    assert "Your edit was not approved" in told and "typing its `name`" in told, told
    await bot.slack.wait_for(
        lambda: card.action_ids() == ["approve_typed", "reject", "answer"],
        what="the card asks a typed name",
    )
    assert agents.EXECUTIONS == []

    await typed(bot, await open_confirmation(bot, card, user="UBOB"), "users", user="UBOB")
    await bot.final_answer(root)
    assert ran("drop_table") == [{"name": "users", "force": True}]


# --- 7. A run started by someone from outside the workspace -----------------------------------


async def test_no_grant_or_always_covers_an_outsiders_calls(bot: Harness) -> None:
    bot.model.script = calls_in_turns([("drop_table", {"name": "tmp_a"}, "c1")])
    root = await bot.start_run("drop tmp_a")
    [card] = await bot.cards(root, 1)
    await bot.sender.choose_grant(
        card, grant_options(card)["drop_table in #general for 1 hour"], user="UBOB"
    )
    await bot.final_answer(root)

    bot.model.script = calls_in_turns([("drop_table", {"name": "tmp_b"}, "c2")])
    job = StartJob(
        run_id=new_run_id(),
        agent="dba",
        task="drop tmp_b",
        conversation=Conversation(channel="CGENERAL", requester="UGUEST", requester_external=True),
        requested_at=time.time(),
    )
    roots = len(bot.slack.roots())
    queue = JobQueue(bot.redis, bot.keys)
    assert await queue.enqueue(job.job_id, job.payload(), run_id=job.run_id, version=job.version)
    await bot.slack.wait_for(lambda: len(bot.slack.roots()) > roots, what="the outsider's run")
    [outsiders] = await bot.cards(bot.slack.roots()[-1], 1)
    assert outsiders.action_ids() == ["approve", "approve_note", "reject", "answer"], (
        "no Approve always, no grant"
    )
    assert ran("drop_table") == [{"name": "tmp_a", "force": False}]
    stored = json.loads(await bot.field(bot.keys.run(job.run_id), "envelope"))
    assert stored["conversation"]["requester_external"] is True


# --- A rolling deploy: a state an earlier worker saved after its `always_approve` --------------


async def test_a_state_saved_with_the_sdks_always_approve_still_judges_every_later_call(
    bot: Harness,
) -> None:
    bot.model.script = calls_in_turns(
        [("drop_table", {"name": "tmp_a"}, "c1")],
        [("drop_table", {"name": "prod_users"}, "c2")],
    )
    root = await bot.start_run("drop tmp_a, then prod_users")
    [card] = await bot.cards(root, 1)
    # What an earlier worker stored: the SDK's tool-wide approval of `drop_table` in the state.
    run_id = card.actions()[0]["value"].split(":")[0]
    key = bot.keys.run(run_id)
    state = await RunState.from_string(
        judged_agents.dba, zlib.decompress(await bot.field(key, "state")).decode()
    )
    [item] = state.get_interruptions()
    state.approve(item, always_approve=True)
    await bot.redis.hset(key, "state", zlib.compress(json.dumps(state.to_json()).encode()))

    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert "c2: The call to drop_table was not run: the approval policy" in answer.text
    assert ran("drop_table") == [{"name": "tmp_a", "force": False}]
