"""MCP servers that ask mid-call (`elicitation/create`), on real processes.

The worker starts the test server `desk` (tests/support/asking_server.py, the `mcp` package's
server API over stdio); its tools ask with a form or a link while they run. The question is
posted in the run's thread and, as a copy, in the requester's direct messages; clicks and the
form's modal are signed as Slack signs them; the server records what it was answered in the
ledger, and its tool returns it, so the model's last input shows what reached the tool.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

from bot.console.slack_payloads import view_submission
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.fake_slack import Message

ASKING = {"AGENTS": "tests.support.mcp_agents:ASKING", "MCP_PROBE_SECONDS": "0.5"}


def told(request: ModelRequest, call_id: str) -> str:
    [output] = [
        item["output"]
        for item in request.input
        if item.get("type") == "function_call_output" and item["call_id"] == call_id
    ]
    if isinstance(output, list):
        return " ".join(str(part.get("text")) for part in output)
    return str(output)


def calls(tool: str, arguments: dict[str, Any]) -> Any:
    def script(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call(tool, arguments, "call_ask")]
        return [message("tool said: " + told(request, "call_ask"))]

    return script


async def ledger(deployment: Deployment) -> list[dict[str, Any]]:
    entries: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    return [json.loads(entry) for entry in entries]


async def audit(deployment: Deployment, event: str) -> list[dict[str, Any]]:
    rows = await deployment.audit_entries()
    return [json.loads(fields[b"details"]) for fields in rows if fields[b"event"].decode() == event]


async def asked(
    deployment: Deployment,
    tool: str,
    arguments: dict[str, Any],
    *,
    workers: int = 1,
    approver: str | None = None,
    agents: dict[str, str] | None = None,
    **env: str,
) -> tuple[Message, Message]:
    """Web and workers on `desk`; a run whose model calls `tool` (approved first by `approver`,
    when the policy asks one); the run's root and the question's message in its thread."""
    deployment.model.script = calls(tool, arguments)
    agents = agents or ASKING
    await deployment.web(**agents, **env)
    for n in range(workers):
        deployment.worker(f"worker.{n + 1}", **agents, **env)
    root = await deployment.start_run("refund order o-1")
    if approver is not None:
        [card] = await deployment.cards(root, 1)
        await deployment.sender.click(card, "approve", user=approver)

    def in_thread() -> Message | None:
        found = [m for m in deployment.slack.questions() if m.thread_ts == root.ts]
        return found[0] if found else None

    try:
        question: Message = await deployment.slack.wait_for(in_thread, 30, "the question")
    except AssertionError as error:
        raise AssertionError(f"{error}\n{deployment.logs_text()}") from None
    return root, question


async def open_form(deployment: Deployment, question: Message, user: str) -> dict[str, Any]:
    opened = len(deployment.slack.views)
    status, _ = await deployment.sender.click(question, "question_answer", user=user)
    assert status == 200
    await deployment.slack.wait_for(lambda: len(deployment.slack.views) > opened, what="form")
    view: dict[str, Any] = deployment.slack.views[-1]
    return view


def typed(amount: str, reason: str, notify: str = "false") -> dict[str, dict[str, Any]]:
    """The form's inputs as Slack sends them (blocks in the schema's order)."""
    return {
        "field_0": {"value": {"type": "number_input", "value": amount}},
        "field_1": {"value": {"type": "plain_text_input", "value": reason}},
        "field_2": {"value": {"type": "static_select", "selected_option": {"value": notify}}},
        "field_3": {"value": {"type": "static_select", "selected_option": {"value": "express"}}},
    }


async def answer_of(deployment: Deployment, root: Message) -> str:
    [answer] = await deployment.final_answers(root)
    return answer.text


async def test_a_form_is_answered_in_a_modal_and_the_tool_gets_the_values(
    deployment: Deployment,
) -> None:
    root, question = await asked(deployment, "refund", {"order": "o-1"})
    text = question.all_text()
    assert "MCP server `desk` asks" in text and "How much should order o-1 get back" in text
    assert question.action_ids() == ["question_answer", "question_decline"]
    [copy] = await deployment.slack.wait_for(
        lambda: [m for m in deployment.slack.questions() if m.thread_ts is None], what="the copy"
    )
    assert copy.channel.startswith("D"), "a copy in the requester's direct messages"

    view = await open_form(deployment, question, "UALICE")
    labels = [b["label"]["text"] for b in view["blocks"] if b["type"] == "input"]
    assert labels == ["Amount", "Reason", "Notify", "Speed"]
    # A value the schema refuses comes back in the modal, recording nothing.
    status, body = await deployment.sender.submit_view(view, user="UALICE", values=typed("0", "x"))
    assert status == 200 and "errors" in body and "field_0" in body
    assert await audit(deployment, "elicitation_answered") == []

    status, _ = await deployment.sender.submit_view(
        view, user="UALICE", values=typed("1200", "damaged")
    )
    assert status == 200
    said = await answer_of(deployment, root)
    sent = {"amount": 1200, "notify": False, "reason": "damaged", "speed": "express"}
    assert said == f"tool said: accept: {json.dumps(sent, sort_keys=True)}"
    [entry] = await audit(deployment, "elicitation_answered")
    assert (entry["action"], entry["by"]) == ("accept", "UALICE")
    assert len(entry["digest"]) == 64 and json.loads(entry["values"]) == sent
    [elicited] = await audit(deployment, "elicited")
    assert (elicited["mcp_server"], elicited["tool"], elicited["mode"]) == (
        "desk",
        "refund",
        "form",
    )
    await deployment.slack.wait_for(
        lambda: all("answered" in m.all_text() for m in deployment.slack.questions()),
        what="the question's messages redrawn",
    )
    assert all(not m.actions() for m in deployment.slack.questions())


async def test_decline_and_a_closed_form_answer_decline_and_cancel(
    deployment: Deployment,
) -> None:
    root, question = await asked(deployment, "refund", {"order": "o-1"})
    [decline] = [a["value"] for a in question.actions() if a["action_id"] == "question_decline"]
    view = await open_form(deployment, question, "UALICE")
    closed = view_submission(view=view, user=deployment.sender.user("UALICE"), values={})
    closed["type"] = "view_closed"
    status, _ = await deployment.sender.interact(closed)
    assert status == 200
    assert await answer_of(deployment, root) == "tool said: cancel: null"
    # A second answer to the same question counts for nothing, and says so privately.
    await deployment.sender.click(question, "question_decline", user="UALICE", value=decline)
    await deployment.slack.wait_for(
        lambda: any("already answered" in e["text"] for e in deployment.slack.ephemerals),
        what="the late click told",
    )
    assert [e["action"] for e in await audit(deployment, "elicitation_answered")] == ["cancel"]


async def test_decline_after_longer_than_the_sessions_read_timeout(deployment: Deployment) -> None:
    root, question = await asked(deployment, "refund", {"order": "o-1"})
    await asyncio.sleep(5)  # a person reading the question: past `desk`'s 4 s read timeout
    await deployment.sender.click(question, "question_decline", user="UALICE")
    assert await answer_of(deployment, root) == "tool said: decline: null"


async def test_a_link_is_done_or_declined(deployment: Deployment) -> None:
    root, question = await asked(deployment, "sign_in", {})
    text = question.all_text()
    assert "https://billing.example.com/login" in text and "Sign in to billing" in text
    assert question.action_ids() == ["question_done", "question_decline"]
    await deployment.sender.click(question, "question_done", user="UALICE")
    assert await answer_of(deployment, root) == "tool said: sign in: accept"


async def test_nobody_answering_in_time_cancels_and_the_thread_says_so(
    deployment: Deployment,
) -> None:
    root, _ = await asked(deployment, "refund", {"order": "o-1"}, ELICITATION_TIMEOUT_SECONDS="2")
    assert await answer_of(deployment, root) == "tool said: cancel: null"
    notes = deployment.slack.notes(root.ts)
    assert any("Nobody answered MCP server `desk`'s question within 2 s" in n.text for n in notes)
    [entry] = await audit(deployment, "elicitation_answered")
    assert (entry["action"], entry["by"]) == ("cancel", "timeout")


async def test_only_the_requester_answers_unless_the_servers_rule_names_others(
    deployment: Deployment, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\ntool = "refund"\nmcp_server = "desk"\nauto = "approve"\n'
        'elicitation_responders = ["UCAROL"]\n'
    )
    root, question = await asked(deployment, "refund", {"order": "o-1"}, POLICY_FILE=str(policy))
    assert "<@UCAROL> may answer" in question.all_text()
    await deployment.sender.click(question, "question_decline", user="UALICE")
    await deployment.slack.wait_for(
        lambda: any("Only <@UCAROL>" in e["text"] for e in deployment.slack.ephemerals),
        what="the refusal, privately",
    )
    assert await audit(deployment, "elicitation_answered") == []
    await deployment.sender.click(question, "question_decline", user="UCAROL")
    assert await answer_of(deployment, root) == "tool said: decline: null"


async def test_a_person_not_allowed_is_told_privately_and_nothing_is_answered(
    deployment: Deployment,
) -> None:
    root, question = await asked(deployment, "refund", {"order": "o-1"})
    opened = len(deployment.slack.views)
    await deployment.sender.click(question, "question_answer", user="UBOB")
    await deployment.slack.wait_for(
        lambda: any("Only <@UALICE>" in e["text"] for e in deployment.slack.ephemerals),
        what="the refusal, privately",
    )
    assert len(deployment.slack.views) == opened, "no form for someone who may not answer"
    await deployment.sender.click(question, "question_decline", user="UBOB")
    await deployment.sender.click(question, "question_decline", user="UALICE")
    assert await answer_of(deployment, root) == "tool said: decline: null"
    assert [e["by"] for e in await audit(deployment, "elicitation_answered")] == ["UALICE"]


async def test_a_worker_killed_while_a_person_answers_loses_the_call_and_asks_again(
    deployment: Deployment, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\ntool = "refund"\nmcp_server = "desk"\napprovers = ["UBOB"]\n')
    root, question = await asked(
        deployment, "refund", {"order": "o-1"}, workers=2, approver="UBOB", POLICY_FILE=str(policy)
    )
    owner = await deployment.job_owner()
    [process] = [p for p in deployment.processes if p.name == owner]
    process.signal(signal.SIGKILL)

    def lost() -> Message | None:
        cards = [c for c in deployment.slack.cards() if c.thread_ts == root.ts]
        return next((c for c in cards if "may have run; its result was lost" in c.all_text()), None)

    try:
        card: Message = await deployment.slack.wait_for(lost, 40, "the 'may have run' card")
    except AssertionError as error:
        raise AssertionError(f"{error}\n{deployment.logs_text()}") from None
    assert "`refund` may have run" in card.all_text()
    assert [e.get("started") for e in await ledger(deployment)] == ["o-1"], "never a second call"
    # The question's waiter is gone with its worker: a late answer is refused, privately.
    [elicited] = await audit(deployment, "elicited")
    waiter = deployment.keys.shard_of(elicited["question_id"].split(".")[0]).question_waiter(
        elicited["question_id"]
    )
    deadline = time.monotonic() + 20
    while await deployment.redis.exists(waiter):
        assert time.monotonic() < deadline, "the waiter key outlived its worker"
        await asyncio.sleep(0.2)
    await deployment.sender.click(question, "question_decline", user="UALICE")
    await deployment.slack.wait_for(
        lambda: any(
            "the call that asked it has ended" in e["text"] for e in deployment.slack.ephemerals
        ),
        what="the late answer refused",
    )
    assert await audit(deployment, "elicitation_answered") == []


async def test_a_stop_while_a_question_waits_answers_cancel_and_the_run_stops(
    deployment: Deployment,
) -> None:
    _, question = await asked(deployment, "refund", {"order": "o-1"})
    [elicited] = await audit(deployment, "elicited")
    status, _ = await deployment.sender.command(f"stop {elicited['question_id'].split('.')[0]}")
    assert status == 200
    deadline = time.monotonic() + 20
    while not (answered := await audit(deployment, "elicitation_answered")):
        assert time.monotonic() < deadline, deployment.logs_text()
        await asyncio.sleep(0.1)
    assert [(e["action"], e["by"]) for e in answered] == [("cancel", "stopped")]
    await deployment.slack.wait_for(
        lambda: "The run was stopped" in question.all_text(), what="the question redrawn"
    )
    told = {"tool": "refund", "action": "cancel", "data": None}
    while told not in await ledger(deployment):  # the tool goes on with the answer, then stops
        assert time.monotonic() < deadline, deployment.logs_text()
        await asyncio.sleep(0.1)
