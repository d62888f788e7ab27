"""The approval loop as a team sees it in Slack."""

from __future__ import annotations

from tests.conftest import on_cluster_too
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


@on_cluster_too
async def test_approve_runs_the_tool_and_answers_in_the_thread(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    assert "<@UALICE> asked *ops*: delete u-100" in root.text

    [card] = await bot.cards(root, 1)
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    assert agents.EXECUTIONS == []

    status, _ = await bot.sender.click(card, "approve", user="UBOB")
    assert status == 200

    answer = await bot.final_answer(root)
    assert answer.text == "done: deleted u-100"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert card.actions() == []
    assert "<@UBOB> approved" in card.all_text()


@on_cluster_too
async def test_approve_always_lets_later_calls_of_the_tool_run_without_a_click(
    bot: Harness,
) -> None:
    def script(request: ModelRequest) -> list[dict[str, object]]:
        outputs = request.tool_outputs
        if not outputs:
            return [tool_call("restart_service", {"service": "api"}, "call_1")]
        if len(outputs) == 1:
            return [tool_call("restart_service", {"service": "search"}, "call_2")]
        return [message(f"{outputs['call_1']} and {outputs['call_2']}")]

    bot.model.script = script
    root = await bot.start_run("restart api and search")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve_always", user="UBOB")

    answer = await bot.final_answer(root)
    assert answer.text == "restarted api and restarted search"
    assert [tool for tool, _ in agents.EXECUTIONS] == ["restart_service", "restart_service"]
    assert len(bot.slack.cards()) == 1, "the second call needed no card"
    assert "<@UBOB> approved `restart_service` for the rest of this run" in card.all_text()


@on_cluster_too
async def test_reject_with_a_reason_tells_the_model_who_and_why(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)

    status, _ = await bot.sender.reject(card, user="UCAROL", reason="Ada is still on payroll")
    assert status == 200

    answer = await bot.final_answer(root)
    told = bot.model.requests[-1].tool_outputs["call_del"]
    assert "rejected by ucarol (UCAROL)" in told
    assert "Ada is still on payroll" in told
    assert answer.text.startswith("done: ")
    assert agents.EXECUTIONS == []
    assert "<@UCAROL> rejected" in card.all_text()
    assert "Ada is still on payroll" in card.all_text()
    assert card.actions() == []


async def test_reject_needs_a_reason(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)

    status, body = await bot.sender.reject(card, user="UCAROL", reason="   ")
    assert status == 200
    assert '"response_action":"errors"' in body.replace(" ", "")
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"], (
        "still open"
    )


@on_cluster_too
async def test_parallel_calls_wait_for_every_decision_then_apply_each(bot: Harness) -> None:
    def script(request: ModelRequest) -> list[dict[str, object]]:
        outputs = request.tool_outputs
        if not outputs:
            return [
                tool_call("delete_user", {"user_id": "u-100"}, "call_a"),
                tool_call("restart_service", {"service": "api"}, "call_b"),
            ]
        return [message(f"a={outputs['call_a']} | b={outputs['call_b']}")]

    bot.model.script = script
    root = await bot.start_run("clean up")
    first, second = await bot.cards(root, 2)
    assert "delete_user" in first.all_text() and "restart_service" in second.all_text()

    await bot.sender.click(first, "approve", user="UBOB")
    await bot.slack.wait_for(lambda: first.actions() == [], what="first card decided")
    assert agents.EXECUTIONS == [], "nothing runs while a call is still pending"
    assert len(bot.model.requests) == 1

    await bot.sender.reject(second, user="UBOB", reason="not today")
    answer = await bot.final_answer(root)
    assert answer.text.startswith("a=deleted u-100 | b=The call to restart_service was rejected")
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]


async def test_a_handoff_and_a_tool_without_approval_show_in_the_status_message(
    bot: Harness,
) -> None:
    def script(request: ModelRequest) -> list[dict[str, object]]:
        if "transfer_to_helper" in request.tools and not request.tool_outputs:
            return [tool_call("list_users", {}, "call_list")]
        if "transfer_to_helper" in request.tools:
            return [tool_call("transfer_to_helper", {}, "call_handoff")]
        if "call_restart" not in request.tool_outputs:
            return [tool_call("restart_service", {"service": "api"}, "call_restart")]
        return [message("helper done")]

    bot.model.script = script
    root = await bot.start_run("list, then hand off")
    [card] = await bot.cards(root, 1)
    assert "*helper* wants to run `restart_service`" in card.all_text()
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "helper done"

    [status] = bot.slack.status_messages(root.ts)
    assert status.text.startswith(":white_check_mark: Done")
    assert status.text.splitlines()[1:] == [
        "• called `list_users`",
        "• handed off to *helper*",
        "• called `restart_service`",
    ], "the steps before the approval are still shown after it"
    assert [tool for tool, _ in agents.EXECUTIONS] == ["list_users", "restart_service"]


@on_cluster_too
async def test_a_finished_run_leaves_only_its_audit_trail(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)

    trail = [(entry.pop("event"), entry) for entry in await bot.audit_until("finished")]
    assert await bot.run_leftovers() == []
    assert [event for event, _ in trail] == [
        "started",
        "requested",
        "approved",
        "resumed",
        "executed",
        "finished",
    ]
    requested, approved, executed = trail[1][1], trail[2][1], trail[4][1]
    assert approved["user_id"] == "UBOB"
    assert requested["tool"] == approved["tool"] == executed["tool"] == "delete_user"
    assert requested["digest"] == approved["digest"] == executed["digest"]
    assert len(requested["digest"]) == 64
    assert executed["outcome"] == "deleted u-100"
