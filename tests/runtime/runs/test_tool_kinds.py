"""Shell and apply_patch calls (the SDK's `ShellTool` and `ApplyPatchTool`), on real processes:
the card shows what would run and the approval binds exactly that; a call that ran is journaled,
audited and reported like a function tool's (issue 18, item 1)."""

from __future__ import annotations

import asyncio
import html
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from runtime.calls.digest import call_digest
from tests.runtime.grants.test_grants import grant_options
from tests.support.deployment import Deployment
from tests.support.fake_openai import (
    Item,
    ModelError,
    ModelRequest,
    apply_patch_call,
    custom_tool_call,
    local_shell_call,
    message,
    shell_call,
)
from tests.support.fake_slack import Message
from tests.test_faults import ledger

SHELL_AGENTS = {"AGENTS": "tests.support.shell_agents:REGISTRY"}
PATCH = {"type": "create_file", "path": "notes.txt", "diff": "+hello\n"}
Script = Callable[[ModelRequest], list[Item] | ModelError]


def shell_then_answer(failures: int = 0) -> Script:
    """Run the task's text as one shell command (call id `call_sh_<task>`); once told the
    output, answer 503 `failures` times, then `done: <output>`."""
    failed = 0

    def script(request: ModelRequest) -> list[Item] | ModelError:
        nonlocal failed
        call_id = "call_sh_" + str(abs(hash(request.task)))
        if call_id not in request.tool_outputs:
            return [shell_call([request.task], call_id)]
        if failed < failures:
            failed += 1
            return ModelError(503, "overloaded")
        return [message("done: " + request.tool_outputs[call_id])]

    return script


def call_then_answer(call: Item, failures: int) -> Script:
    """Make `call`; once told its output, answer 503 `failures` times, then `done: <output>`."""
    failed = 0

    def script(request: ModelRequest) -> list[Item] | ModelError:
        nonlocal failed
        if call["call_id"] not in request.tool_outputs:
            return [call]
        if failed < failures:
            failed += 1
            return ModelError(503, "overloaded")
        return [message("done: " + request.tool_outputs[call["call_id"]])]

    return script


async def started(deployment: Deployment, **env: str) -> None:
    await deployment.web(**SHELL_AGENTS)
    deployment.worker("worker.1", **SHELL_AGENTS, **env)


async def audit(deployment: Deployment) -> list[dict[str, Any]]:
    return [
        {"event": e[b"event"].decode(), **json.loads(e[b"details"])}
        for e in await deployment.audit_entries()
    ]


def shown(card: Message) -> str:
    """The card's code block of what would run, as a person reads it (Slack unescapes it)."""
    [block] = [b for b in card.blocks if b.get("block_id") == "call_arguments"]
    return html.unescape(str(block["text"]["text"]))


async def test_a_shell_card_shows_the_command_and_each_command_has_its_own_digest(
    deployment: Deployment,
) -> None:
    deployment.model.script = shell_then_answer()
    await started(deployment)
    first = await deployment.start_run("echo harmless >> f")
    [card] = await deployment.cards(first, 1)
    assert '"echo harmless >> f"' in shown(card), shown(card)
    second = await deployment.start_run("echo SOMETHING-ELSE >> f")
    [other] = await deployment.cards(second, 1)
    assert '"echo SOMETHING-ELSE >> f"' in shown(other), shown(other)

    digests = [e["digest"] for e in await audit(deployment) if e["event"] == "requested"]
    assert len(digests) == 2 and digests[0] != digests[1], digests
    assert await ledger(deployment) == [], "nothing ran without an approval"


async def test_an_exact_arguments_grant_on_one_command_does_not_cover_another(
    deployment: Deployment,
) -> None:
    deployment.slack.channels["CGENERAL"] = "general"
    deployment.model.script = shell_then_answer()
    await started(deployment)
    first = await deployment.start_run("echo harmless >> f")
    [card] = await deployment.cards(first, 1)
    await deployment.sender.choose_grant(
        card, grant_options(card)["these exact arguments for 24 hours"], user="UBOB"
    )
    [answer] = await deployment.final_answers(first)
    assert answer.text.startswith("done: "), answer.text

    same = await deployment.start_run("echo harmless >> f")
    await deployment.final_answers(same)
    assert [c for c in deployment.slack.cards() if c.thread_ts == same.ts] == []

    other = await deployment.start_run("echo SOMETHING-ELSE >> f")
    [other_card] = await deployment.cards(other, 1)
    assert '"echo SOMETHING-ELSE >> f"' in shown(other_card)
    ran = [entry["commands"] for entry in await ledger(deployment)]
    assert ran == [["echo harmless >> f"]] * 2, ran


async def ran_once_despite_model_failures(deployment: Deployment, tool: str) -> None:
    """Approve the run's one card; the model fails after the tool ran, the job is retried."""
    root = await deployment.start_run("echo once >> f")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    answers = await deployment.slack.wait_for(
        lambda: deployment.slack.final_answers(root.ts), 60, "final answer"
    )
    assert answers[0].text.startswith("done: "), answers[0].text
    assert [e["tool"] for e in await ledger(deployment)] == [tool], deployment.logs_text()

    trail = await audit(deployment)
    [requested] = [e for e in trail if e["event"] == "requested"]
    [executed] = [e for e in trail if e["event"] == "executed"]
    assert executed["tool"] == tool
    assert executed["digest"] == requested["digest"], "what ran is what was approved"
    assert any(e["event"] == "replayed" for e in trail), "a retry reused the recorded output"

    [status] = deployment.slack.status_messages(root.ts)
    assert "Nothing ran" not in status.all_text(), status.all_text()
    assert tool in status.all_text(), status.all_text()


async def test_a_shell_call_that_ran_is_journaled_audited_and_reported(
    deployment: Deployment,
) -> None:
    # The openai client retries twice per delivery: 4 failures outlast the first delivery's.
    deployment.model.script = shell_then_answer(failures=4)
    await started(deployment, JOB_MAX_DELIVERIES="6")
    await ran_once_despite_model_failures(deployment, "shell")


async def test_an_apply_patch_call_shows_the_patch_and_runs_once(
    deployment: Deployment,
) -> None:
    deployment.model.script = call_then_answer(apply_patch_call(PATCH, "call_ap"), failures=4)
    await started(deployment, JOB_MAX_DELIVERIES="6")
    root = await deployment.start_run("write the notes")
    [card] = await deployment.cards(root, 1)
    for part in ('"create_file"', '"notes.txt"', '"+hello\\n"'):
        assert part in shown(card), shown(card)
    await deployment.sender.click(card, "approve", user="UBOB")
    answers = await deployment.slack.wait_for(
        lambda: deployment.slack.final_answers(root.ts), 60, "final answer"
    )
    assert answers[0].text == "done: create_file notes.txt", answers[0].text
    assert [e["tool"] for e in await ledger(deployment)] == ["apply_patch"], deployment.logs_text()
    trail = await audit(deployment)
    [requested] = [e for e in trail if e["event"] == "requested"]
    [executed] = [e for e in trail if e["event"] == "executed"]
    assert executed["digest"] == requested["digest"], "what ran is what was approved"
    assert any(e["event"] == "replayed" for e in trail)
    [status] = deployment.slack.status_messages(root.ts)
    assert "Nothing ran" not in status.all_text(), status.all_text()


async def test_a_local_shell_call_runs_once_and_is_audited(deployment: Deployment) -> None:
    """The SDK runs a local shell call without asking (it cannot ask): still, at most once."""
    deployment.model.script = call_then_answer(local_shell_call(["touch", "f"], "call_ls"), 4)
    await started(deployment, JOB_MAX_DELIVERIES="6")
    root = await deployment.start_run("touch f")
    answers = await deployment.slack.wait_for(
        lambda: deployment.slack.final_answers(root.ts), 60, "final answer"
    )
    assert answers[0].text == "done: ran touch f", answers[0].text
    assert [e["tool"] for e in await ledger(deployment)] == ["local_shell"], deployment.logs_text()
    trail = await audit(deployment)
    [executed] = [e for e in trail if e["event"] == "executed"]
    assert executed["tool"] == "local_shell" and executed["call_id"] == "call_ls"
    assert any(e["event"] == "replayed" for e in trail)


async def test_a_custom_tool_call_shows_its_input_and_runs_once(deployment: Deployment) -> None:
    deployment.model.script = call_then_answer(custom_tool_call("note", "buy milk", "call_ct"), 4)
    await started(deployment, JOB_MAX_DELIVERIES="6")
    root = await deployment.start_run("remember the milk")
    [card] = await deployment.cards(root, 1)
    assert "buy milk" in shown(card), shown(card)
    await deployment.sender.click(card, "approve", user="UBOB")
    answers = await deployment.slack.wait_for(
        lambda: deployment.slack.final_answers(root.ts), 60, "final answer"
    )
    assert answers[0].text == "done: noted buy milk", answers[0].text
    assert [e["tool"] for e in await ledger(deployment)] == ["note"], deployment.logs_text()
    trail = await audit(deployment)
    [requested] = [e for e in trail if e["event"] == "requested"]
    [executed] = [e for e in trail if e["event"] == "executed"]
    assert executed["digest"] == requested["digest"]


def test_function_tool_and_mcp_digests_are_unchanged() -> None:
    """Stored approvals and grants hold these digests: the kinds added none to them."""
    assert call_digest("delete_user", '{"user_id": "u-100"}') == (
        "9056a44f845f97c35a9635fe94239f6ea1785bc9d53a852b68607e1d5a5f456a"
    )
    assert call_digest("drop_table", '{"table":"orders"}', "db") == (
        "d202baaf743c936aff13973fd0ac6be55d06c409f7200408e9907f20c018131b"
    )
    assert call_digest("x", "not json") == (
        "0ac22f8d73c372fa477b77fece4e95f33870cb84b4bde09484b3b7bf4f549ded"
    )
    shell = '{"commands":["ls"],"max_output_length":null,"timeout_ms":null}'
    assert call_digest("shell", shell, kind="shell") != call_digest("shell", shell)


async def test_a_registry_with_a_tool_that_cannot_be_described_is_refused_at_load(
    deployment: Deployment,
) -> None:
    environ = {**os.environ, **deployment.env(AGENTS="tests.support.shell_agents:UNDESCRIBABLE")}
    # What the Procfile's `worker` line runs.
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "worker",
        env=environ,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode == 2, stderr
    [line] = stderr.decode().strip().splitlines()
    assert "agent 'desk'" in line and "tool 'remote_desktop'" in line, line
    assert "needs approval" in line and "cannot describe" in line, line
