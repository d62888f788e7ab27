"""Rules by argument (issue 20 item 1): a rule's `when` (CEL) picks who decides from what the
call does, an expression that cannot be evaluated loosens nothing, a bad one stops both
processes with its line, and the backtest replays `when` on the arguments the trail kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.policy import PolicyError, load_policy
from runtime.settings import RuntimeSettings
from tests import agents
from tests.deployment import Deployment
from tests.fake_openai import Item, ModelRequest, message, tool_call
from tests.harness import Harness
from tests.processes import Process, procfile
from tests.test_approvers import ephemeral_for
from tests.test_backtest import lines, policy
from tests.test_edits import open_editor, submit

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
    assert (await bot.final_answer(root)).text == "done: deleted admin-7"
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
    assert card.action_ids() == ["approve", "reject"], "and no Approve always either"
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
    settings = RuntimeSettings.model_validate({"POLICY_FILE": str(path)})
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


async def test_an_edit_that_moves_the_call_under_a_stricter_rule_is_refused(
    bot: Harness,
) -> None:
    bot.model.script = deleting("u-100")
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)  # bob's, under the second rule
    modal = await open_editor(bot, card, user="UBOB")

    answer = await submit(bot, modal, '{"user_id": "admin-7"}', user="UBOB")
    assert answer["response_action"] == "errors"
    assert answer["errors"]["arguments"] == (
        f"These arguments fall under the rule `{ADMINS}`: UCAROL must approve. Nothing was "
        "recorded: change them back, or reject the call and ask for it again."
    )
    trail = [e[b"event"] for e in await bot.entries(bot.keys.audit)]
    assert b"edited" not in trail and b"approved" not in trail
    assert card.action_ids() == ["approve", "approve_always", "reject"], "still open"

    # An edit the call's own rule still covers goes through.
    assert await submit(bot, modal, '{"user_id": "u-101"}', user="UBOB") == {}
    assert (await bot.final_answer(root)).text.endswith("deleted u-101")
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-101"})]
