"""Runs that go wrong end with a readable message in the thread, and nothing is retried forever."""

from __future__ import annotations

import json
import logging

import pytest

from runtime.db.keys import JOB_GROUP
from tests.support import agents
from tests.support.fake_openai import ModelError, ModelRequest, message, tool_call
from tests.support.harness import Harness


async def test_a_model_error_ends_the_run_with_a_readable_message(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bot.model.script = lambda request: ModelError(400, "Invalid 'input': secret upstream text")
    root = await bot.start_run("do something")
    answer = await bot.final_answer(root)
    assert answer.text.startswith(
        ":x: The model could not be used (the model API answered HTTP 400)."
    )
    assert "secret upstream text" not in answer.text
    assert "Traceback" not in answer.text
    await bot.jobs_done()
    assert await bot.run_leftovers() == []
    pending = await bot.redis.xpending(bot.keys.jobs, JOB_GROUP)
    assert pending["pending"] == 0, "the job was acknowledged, not left for a retry"


async def test_a_model_error_after_approval_ends_the_run_once(bot: Harness) -> None:
    def script(request: ModelRequest) -> list[dict[str, object]] | ModelError:
        if not request.tool_outputs:
            return [tool_call("delete_user", {"user_id": "u-1"}, "c1")]
        return ModelError(401, "bad key")

    bot.model.script = script
    root = await bot.start_run("delete u-1")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert "HTTP 401" in answer.text
    await bot.jobs_done()
    assert len(bot.slack.final_answers(root.ts)) == 1
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-1"})]


async def test_a_failing_tool_is_reported_to_the_model_not_to_the_channel(bot: Harness) -> None:
    def script(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("explode", {}, "c1")]
        return [message("the tool failed, sorry")]

    bot.model.script = script
    root = await bot.start_run("explode")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert answer.text == "the tool failed, sorry"
    told = bot.model.requests[-1].tool_outputs["c1"]
    assert "error" in told.lower()
    assert all("boom" not in m.all_text() for m in bot.slack.messages.values())


@pytest.fixture
def env_overrides() -> dict[str, str]:
    return {"JOB_MAX_DELIVERIES": "2", "JOB_IDLE_TIMEOUT_SECONDS": "0.5"}


async def test_a_job_that_keeps_failing_is_dead_lettered_and_the_requester_told(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bot.model.script = lambda request: [message("never reached")]
    for _ in range(3):  # every attempt to post the root message fails
        bot.slack.fail_next("chat.postMessage", 200, {"ok": False, "error": "fatal_error"})
    with caplog.at_level(logging.INFO):
        await bot.sender.command("do it", user="UALICE")
        told = await bot.slack.wait_for(lambda: bot.slack.responses, timeout=15, what="reply")
    assert "kept failing" in told[0]["text"]
    assert told[0]["response_type"] == "ephemeral"
    [dead] = await bot.entries(bot.keys.dead_jobs)
    assert json.loads(dead[b"job"])["task"] == "do it"
    assert await bot.redis.xlen(bot.keys.jobs) == 0
    assert bot.model.requests == []


async def test_a_model_that_keeps_failing_is_retried_then_dead_lettered(bot: Harness) -> None:
    bot.model.script = lambda request: ModelError(500, "upstream is down")
    root = await bot.start_run("do something")
    answer = await bot.final_answer(root, timeout=30)
    assert answer.text.startswith(":x: Something kept failing while running this task")
    assert "upstream is down" not in answer.text
    # 3 openai-client attempts per delivery (its own 2 retries), 2 deliveries before the burial
    assert len(bot.model.requests) == 6
    [dead] = await bot.entries(bot.keys.dead_jobs)
    assert json.loads(dead[b"job"])["kind"] == "start"


async def test_a_tool_that_keeps_raising_is_retried_then_dead_lettered(bot: Harness) -> None:
    def script(request: ModelRequest) -> list[dict[str, object]]:
        return [tool_call("write_ledger", {"entry": "x"}, "c1")]

    bot.model.script = script
    root = await bot.start_run("write the ledger")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root, timeout=30)
    assert answer.text.startswith(":x: Something kept failing while running this task")
    assert "ledger database unreachable" not in answer.text
    assert [tool for tool, _ in agents.EXECUTIONS] == ["write_ledger", "write_ledger"]
    [dead] = await bot.entries(bot.keys.dead_jobs)
    assert json.loads(dead[b"job"])["kind"] == "resume"
    assert len(bot.slack.final_answers(root.ts)) == 1
