"""Rules by argument (issue 20 item 1): a rule's `when` (CEL) picks who decides from what the
call does, an expression that cannot be evaluated loosens nothing, a bad one stops both
processes with its line, and the backtest replays `when` on the arguments the trail kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.policy import PolicyError, load_policy
from runtime.settings import RuntimeSettings
from tests.runtime.deciders.test_approvers import ephemeral_for
from tests.runtime.decisions.test_edits import open_editor, submit
from tests.runtime.review.test_backtest import lines, policy
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.processes import Process, procfile

ADMINS = "args.user_id.startsWith('admin-')"
POLICY = f"""
# Deleting an administrator is for carol; anyone else, bob.
[[rule]]
tool = "delete_user"
when = "{ADMINS}"
approvers = ["UCAROL"]

[[rule]]
tool = "delete_user"
approvers = ["UBOB"]

# Refunds: over $1,000 two people of finance, up to $100 anyone.
[[rule]]
name = "refunds over $1,000"
tool = "refund_order"
when = "args.amount_cents > 100000"
approvers = ["UCAROL", "UDAVE"]
quorum = 2

[[rule]]
tool = "refund_order"
when = "args.amount_cents <= 10000"
anyone = true

# Restarts of a named service need nobody: the rule needs an argument no call sends.
[[rule]]
tool = "restart_service"
when = "args.region == 'eu'"
auto = "approve"
"""


@pytest.fixture
def env_overrides(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path)}


def deleting(user_id: str) -> Callable[[ModelRequest], list[Item]]:
    def script(request: ModelRequest) -> list[Item]:
        if not request.tool_outputs:
            return [tool_call("delete_user", {"user_id": user_id}, "call_del")]
        return [message("done: " + request.tool_outputs["call_del"])]

    return script


async def test_a_when_rule_chooses_the_approvers_by_argument(bot: Harness) -> None:
    bot.model.script = deleting("admin-7")
    root = await bot.start_run("delete admin-7")
    [card] = await bot.cards(root, 1)
    assert f"Rule: `{ADMINS}`" in card.all_text(), "the card names the rule that chose"
    await bot.sender.click(card, "approve", user="UBOB")
    assert "Only UCAROL may decide" in await ephemeral_for(bot, "UBOB")
    await bot.sender.click(card, "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text.endswith("deleted admin-7")
    trail = await bot.audit_until("finished")
    [asked] = [e for e in trail if e["event"] == "requested"]
    assert (asked["approvers"], asked["when"]) == ("UCAROL", ADMINS)

    bot.model.script = deleting("u-100")
    other = await bot.start_run("delete u-100")
    [plain] = await bot.cards(other, 1)
    assert "Rule:" not in plain.all_text(), "the second rule has no `when`"
    await bot.sender.click(plain, "approve", user="UCAROL")
    assert "Only UBOB may decide" in await ephemeral_for(bot, "UCAROL")
    await bot.sender.click(plain, "approve", user="UBOB")
    assert (await bot.final_answer(other)).text == "done: deleted u-100"


async def test_an_expression_that_cannot_be_evaluated_asks_instead_of_approving(
    bot: Harness,
) -> None:
    def script(request: ModelRequest) -> list[Item]:
        if not request.tool_outputs:
            return [tool_call("restart_service", {"service": "api"}, "call_restart")]
        return [message("done: " + request.tool_outputs["call_restart"])]

    bot.model.script = script
    root = await bot.start_run("restart the api")
    [card] = await bot.cards(root, 1)  # `args.region` is missing: no auto-approve
    assert card.action_ids() == ["approve", "approve_note", "reject", "answer"], (
        "and no Approve always either"
    )
    assert agents.EXECUTIONS == []
    trail = await bot.audit_until("requested")
    assert not [e for e in trail if e["event"] == "auto_approved"]
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: restarted api"


async def test_the_backtest_replays_a_when_rule_on_the_kept_arguments(
    bot: Harness, tmp_path: Path
) -> None:
    for user_id in ("admin-7", "u-100"):
        bot.model.script = deleting(user_id)
        root = await bot.start_run(f"delete {user_id}")
        [card] = await bot.cards(root, 1)
        await bot.sender.click(card, "approve", user="UCAROL" if user_id == "admin-7" else "UBOB")
        await bot.final_answer(root)
    proposal = (
        '[[rule]]\ntool = "delete_user"\nwhen = "args.user_id == \'u-100\'"\nauto = "reject"\n'
    )
    found = lines(policy(bot, tmp_path / "proposal.toml", "backtest", "--json", text=proposal))
    by_user = {c["run_id"]: (c["would"], c["rule"]) for c in found}
    assert sorted(by_user.values()) == [
        ("ask", None),  # admin-7: the expression is false, no rule
        ("auto_reject", f"{tmp_path / 'proposal.toml'}:1"),  # u-100
    ]


def test_a_bad_expression_names_the_file_the_line_and_the_parsers_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('[[rule]]\ntool = "delete_user"\n\nwhen = "args.user_id =="\n')
    settings = RuntimeSettings.from_environ({"POLICY_FILE": str(path)})
    with pytest.raises(PolicyError) as raised:
        load_policy(settings)
    text = str(raised.value)
    assert f"POLICY_FILE={path}: line 4: rule 1 `when`" in text
    assert "Syntax error" in text


async def test_a_bad_expression_stops_both_processes_with_its_line(
    deployment: Deployment, tmp_path: Path
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[rule]]\ntool = "refund_order"\nwhen = "args.amount_cents >"\n')
    for name in ("web", "worker"):
        process = Process(
            name, procfile()[name], deployment.env(POLICY_FILE=str(path)), deployment.logs
        )
        deployment.processes.append(process)
        assert await process.wait(timeout=30) == 2, process.log()
        assert f"POLICY_FILE={path}: line 3: rule 1 `when`" in process.log(), process.log()
        assert "Syntax error" in process.log()


def refunding(order_id: str, cents: int) -> Callable[[ModelRequest], list[Item]]:
    def script(request: ModelRequest) -> list[Item]:
        if not request.tool_outputs:
            arguments = {"order_id": order_id, "amount_cents": cents}
            return [tool_call("refund_order", arguments, "call_ref")]
        return [message("done: " + request.tool_outputs["call_ref"])]

    return script


async def test_an_edit_under_a_stricter_rule_is_refused_and_the_card_asks_under_it(
    bot: Harness,
) -> None:
    bot.model.script = refunding("o-5521", 5000)
    root = await bot.start_run("refund o-5521 5000")
    [card] = await bot.cards(root, 1)
    assert "Rule: `args.amount_cents &lt;= 10000`" in card.all_text(), "anyone may decide"
    modal = await open_editor(bot, card, user="UBOB")

    edited = '{"order_id": "o-5521", "amount_cents": 150000}'
    assert await submit(bot, modal, edited, user="UBOB") == {}, "the modal closes"
    told = await ephemeral_for(bot, "UBOB")
    assert told.startswith(
        "Your edit was not approved: the edited call falls under the rule "
        "*refunds over $1,000*, so 2 of <@UCAROL>, <@UDAVE> must approve it."
    ), told

    await bot.slack.wait_for(
        lambda: "Rule: refunds over $1,000" in card.all_text(), what="the card under the new rule"
    )
    text = card.all_text()
    assert "0 of 2 approvals" in text and "150000" in text, text
    assert "approve" in card.action_ids(), "still open"
    trail = [e[b"event"] for e in await bot.entries(bot.keys.audit)]
    assert b"edited" in trail and b"regated" in trail and b"approved" not in trail

    # Anyone could approve under the old rule; under the new one only carol and dave, both.
    notes = len(bot.slack.ephemerals)
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.slack.wait_for(lambda: len(bot.slack.ephemerals) > notes, what="bob's refusal")
    assert "UCAROL" in bot.slack.ephemerals[-1]["text"], bot.slack.ephemerals[-1]
    await bot.sender.click(card, "approve", user="UCAROL")
    await bot.slack.wait_for(lambda: "1 of 2 approvals" in card.all_text(), what="1 of 2")
    assert agents.EXECUTIONS == [], "one approval of two runs nothing"
    await bot.sender.click(card, "approve", user="UDAVE")
    assert (await bot.final_answer(root)).text.endswith("refunded 150000 on o-5521")
    assert agents.EXECUTIONS == [("refund_order", {"order_id": "o-5521", "amount_cents": 150000})]
    await bot.slack.wait_for(lambda: "approved `refund_order`" in card.all_text(), what="decided")
    assert "Edited by <@UBOB>" in card.all_text(), "bob edited; carol and dave approved"


async def test_an_edit_that_moves_the_call_under_another_rules_approvers_asks_them(
    bot: Harness,
) -> None:
    bot.model.script = deleting("u-100")
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)  # bob's, under the second rule
    modal = await open_editor(bot, card, user="UBOB")

    assert await submit(bot, modal, '{"user_id": "admin-7"}', user="UBOB") == {}
    told = await ephemeral_for(bot, "UBOB")
    assert f"falls under the rule `{ADMINS}`, so <@UCAROL> must approve it" in told, told
    await bot.slack.wait_for(lambda: f"Rule: `{ADMINS}`" in card.all_text(), what="new rule")
    assert "approve" in card.action_ids(), "still open"

    # The new card binds the edited arguments: carol's approval runs exactly them, once.
    await bot.sender.click(card, "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text.endswith("deleted admin-7")
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "admin-7"})]
