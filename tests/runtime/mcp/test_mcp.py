"""Tools from MCP servers behind the same cards, on real processes.

The worker starts the test MCP server (`db`, tests/support/mcp_server.py) over stdio exactly as the
SDK
does, keeps it, and reconnects it; the server records each `drop_table` it runs in the ledger,
so "ran once" and "never ran" are counted where the tool runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.calls.digest import call_digest
from tests.bot.blocks.test_cards import texts
from tests.runtime.journal.test_held_outputs import held_card
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelError, ModelRequest, message, tool_call
from tests.support.fake_slack import Message

MCP_AGENTS = {"AGENTS": "tests.support.mcp_agents:REGISTRY", "MCP_PROBE_SECONDS": "0.5"}


def told(request: ModelRequest, call_id: str) -> str:
    """What the model was told a call returned: an MCP tool's output is a list of parts."""
    [output] = [
        item["output"]
        for item in request.input
        if item.get("type") == "function_call_output" and item["call_id"] == call_id
    ]
    if isinstance(output, list):
        return " ".join(str(part.get("text")) for part in output)
    return str(output)


def drop_then_answer(request: ModelRequest) -> list[dict[str, object]]:
    """Ask to drop the orders table (call id `call_drop`); then answer with what it was told."""
    if not request.tool_outputs:
        return [tool_call("drop_table", {"table": "orders"}, "call_drop")]
    return [message("done: " + told(request, "call_drop"))]


async def drops(deployment: Deployment) -> list[dict[str, Any]]:
    entries: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    return [json.loads(entry) for entry in entries]


async def server_pids(deployment: Deployment) -> list[int]:
    pids: Any = await deployment.redis.lrange(f"{deployment.ledger_key}:mcp:pids", 0, -1)
    return [int(pid) for pid in pids]


async def wait_until(what: str, check: Any, deployment: Deployment, timeout: float = 60) -> Any:
    # A worker that starts an MCP server was seen taking 16 s to be ready on two loaded cores.
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened:\n{deployment.logs_text()}")
        await asyncio.sleep(0.05)
    return value


async def audit_events(deployment: Deployment) -> list[dict[str, Any]]:
    rows: Any = await deployment.redis.xrange(deployment.keys.audit)
    return [
        {"event": fields[b"event"].decode(), **json.loads(fields[b"details"])} for _, fields in rows
    ]


async def start(deployment: Deployment, **env: str) -> Message:
    """Web and one worker on the MCP agents; a run asking to drop a table; its card."""
    deployment.model.script = drop_then_answer
    await deployment.web(**MCP_AGENTS)
    deployment.worker("worker.1", **{**MCP_AGENTS, **env})
    await wait_until("the worker's MCP server", _pids(deployment, 1), deployment)
    root = await deployment.start_run("drop the orders table")
    [card] = await deployment.cards(root, 1)
    return card


async def test_an_approved_mcp_call_shows_its_server_and_runs_once(
    deployment: Deployment,
) -> None:
    card = await start(deployment)
    text = "\n".join(texts(card.blocks))
    assert "*ops* wants to run `drop_table` on MCP server `db`" in text
    assert "Drop a table and every row in it. This cannot be undone." in text
    assert '"table": "orders"' in text
    digest = call_digest("drop_table", '{"table": "orders"}', "db")
    assert f"sha256:{digest[:16]}" in text, "the digest covers the server"
    assert "drop_table" in deployment.model.requests[0].tools, "the model was offered it"

    await deployment.sender.click(card, "approve", user="UBOB")
    root = deployment.slack.roots()[-1]
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: dropped orders"
    assert await drops(deployment) == [{"tool": "drop_table", "arguments": {"table": "orders"}}]
    executed = [e for e in await audit_events(deployment) if e["event"] == "executed"]
    assert [(e["tool"], e["mcp_server"], e["digest"]) for e in executed] == [
        ("drop_table", "db", digest)
    ]


async def test_a_rejected_mcp_call_never_runs_and_the_model_reads_why(
    deployment: Deployment,
) -> None:
    card = await start(deployment)
    await deployment.sender.reject(card, user="UBOB", reason="orders are still needed")
    root = deployment.slack.roots()[-1]
    [answer] = await deployment.final_answers(root)
    assert "rejected by" in answer.text and "orders are still needed" in answer.text
    await wait_until("the run's end", _finished(deployment), deployment)
    assert await drops(deployment) == []


def _finished(deployment: Deployment) -> Any:
    async def check() -> bool:
        return any(e["event"] in ("finished", "failed") for e in await audit_events(deployment))

    return check


async def test_a_new_worker_reconnects_the_server_and_runs_the_approval_once(
    deployment: Deployment,
) -> None:
    card = await start(deployment)
    [first] = deployment.processes[1:]
    first.signal(signal.SIGKILL)
    await first.wait(timeout=10)
    deployment.worker("worker.2", **MCP_AGENTS)
    await wait_until("a second server", _pids(deployment, 2), deployment)

    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(deployment.slack.roots()[-1])
    assert answer.text == "done: dropped orders"
    assert len(await drops(deployment)) == 1


def _pids(deployment: Deployment, count: int) -> Any:
    async def check() -> bool:
        return len(await server_pids(deployment)) >= count

    return check


async def test_a_server_killed_while_a_card_waits_is_reconnected_and_runs_the_call(
    deployment: Deployment,
) -> None:
    card = await start(deployment, MCP_PROBE_SECONDS="60")  # found by the resume, not a probe
    [pid] = await server_pids(deployment)
    os.kill(pid, signal.SIGKILL)

    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(deployment.slack.roots()[-1])
    assert answer.text == "done: dropped orders"
    assert len(await server_pids(deployment)) == 2, "a new server process"
    assert len(await drops(deployment)) == 1
    log = deployment.logs_text()
    assert "MCP server 'db' did not answer" in log and "MCP server 'db' reconnected" in log


async def test_a_server_that_stays_down_is_named_in_the_thread(deployment: Deployment) -> None:
    card = await start(deployment, MCP_WAIT_SECONDS="3")
    await deployment.redis.set(f"{deployment.ledger_key}:mcp:down", "1", ex=600)
    [pid] = await server_pids(deployment)
    os.kill(pid, signal.SIGKILL)

    await deployment.sender.click(card, "approve", user="UBOB")
    root = deployment.slack.roots()[-1]
    [told] = await deployment.final_answers(root)
    assert told.text.startswith(":x: The MCP server `db` could not be reached"), told.text
    assert "nothing more was run" in told.text
    await wait_until("the run's end", _finished(deployment), deployment)
    failed = [e for e in await audit_events(deployment) if e["event"] == "failed"]
    assert [e["failure"] for e in failed] == ["mcp_unavailable"]
    assert await drops(deployment) == []

    async def retried() -> bool:
        return "MCP server 'db' cannot be reached" in deployment.logs_text()

    await wait_until("a logged reconnect attempt naming the server", retried, deployment)


@pytest.mark.parametrize(
    ("rules", "tool", "expected"),
    [
        ('tool = "drop_*"\nmcp_server = "db*"\nauto = "reject"', "drop_table", "no card"),
        ('tool = "drop_*"\nmcp_server = "other*"\nauto = "reject"', "drop_table", "card"),
        ('tool = "list_*"\nmcp_server = "d?"\napprovers = ["U0DBA"]', "list_tables", "card"),
        ('tool = "list_*"\nagent = "nobody"\nmcp_server = "db"', "list_tables", "runs"),
        ('tool = "list_*"\nauto = "approve"\nreview_output = true', "list_tables", "held"),
    ],
    ids=[
        "auto-reject-by-server",
        "other-server",
        "policy-requires",
        "rule-for-other-agent",
        "output-held",
    ],
)
async def test_policy_rules_match_mcp_tools_by_server_name(
    deployment: Deployment, tmp_path: Path, rules: str, tool: str, expected: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(f"[[rule]]\n{rules}\n")

    def script(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call(tool, {"table": "orders"} if tool == "drop_table" else {}, "c1")]
        return [message("told: " + told(request, "c1"))]

    deployment.model.script = script
    await deployment.web(**MCP_AGENTS, POLICY_FILE=str(policy))
    deployment.worker("worker.1", **MCP_AGENTS, POLICY_FILE=str(policy))
    root = await deployment.start_run("do it")
    if expected == "card":
        [card] = await deployment.cards(root, 1)
        assert f"`{tool}` on MCP server `db`" in card.all_text()
        if "U0DBA" in rules:
            assert "Who may decide" in card.all_text()
        return
    if expected == "held":  # runs without a card; its output waits for a person
        held = await held_card(deployment, root, timeout=60)
        assert "users" in held.all_text() and len(deployment.model.requests) == 1
        await deployment.sender.click(held, "approve", user="UBOB")
        [answer] = await deployment.final_answers(root)
        assert answer.text == "told: users, orders"
        return
    [answer] = await deployment.final_answers(root)
    assert deployment.slack.cards() == []
    if expected == "no card":
        refused = "The call to drop_table was not run: the approval policy does not allow it."
        assert answer.text == f"told: {refused}"
        assert await drops(deployment) == []
        events = [e["event"] for e in await audit_events(deployment)]
        assert "auto_rejected" in events
    else:
        assert answer.text == "told: users, orders"


async def test_help_lists_each_agents_mcp_tools_from_the_workers_listing(
    deployment: Deployment,
) -> None:
    await deployment.web(**MCP_AGENTS)
    status, body = await deployment.sender.command("help")
    assert status == 200 and "MCP" not in body["text"], "no worker has listed any yet"
    deployment.worker("worker.1", **MCP_AGENTS)

    async def listed() -> str | None:
        _, body = await deployment.sender.command("help")
        text = str(body["text"])
        # Each agent's listing is published as its tools are first built: wait for both.
        return text if text.count("tools from MCP servers") == 2 else None

    text = await wait_until("the listing", listed, deployment)
    assert "• `ops` tools from MCP servers: `list_tables`, `drop_table` on `db`" in text
    assert "• `reports` tools from MCP servers: `list_tables` on `db`" in text, "its filter"
    assert len(await server_pids(deployment)) == 1, "two agents, one server: connected once"


async def test_an_approved_mcp_call_runs_once_however_often_the_model_fails_after_it(
    deployment: Deployment,
) -> None:
    failed = 0

    def script(request: ModelRequest) -> list[dict[str, object]] | ModelError:
        nonlocal failed
        if not request.tool_outputs:
            return [tool_call("drop_table", {"table": "orders"}, "call_drop")]
        if failed < 7:  # outlasts the openai client's retries of two deliveries
            failed += 1
            return ModelError(503, "overloaded")
        return [message("done: " + told(request, "call_drop"))]

    deployment.model.script = script
    await deployment.web(**MCP_AGENTS)
    deployment.worker("worker.1", **MCP_AGENTS, JOB_MAX_DELIVERIES="6")
    root = await deployment.start_run("drop the orders table")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")

    answers = await deployment.slack.wait_for(
        lambda: deployment.slack.final_answers(root.ts), 60, "final answer"
    )
    assert answers[0].text == "done: dropped orders", "the recorded output reached the model"
    assert len(await drops(deployment)) == 1, deployment.logs_text()
    events = [e["event"] for e in await audit_events(deployment)]
    assert events.count("executed") == 1
    assert events.count("replayed") >= 1, "a retried delivery reused the recorded output"


async def test_a_stopping_worker_closes_its_mcp_server(deployment: Deployment) -> None:
    await deployment.web(**MCP_AGENTS)
    worker = deployment.worker("worker.1", **MCP_AGENTS)
    [pid] = await wait_until("the worker's MCP server", lambda: server_pids(deployment), deployment)
    worker.signal(signal.SIGTERM)
    assert await worker.wait(timeout=28) == 0, worker.log()
    assert "MCP servers closed: 1" in worker.log()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
