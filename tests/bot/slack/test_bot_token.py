"""A wrong Slack bot token is found at start, by both processes, and a revoked one holds the runs
instead of retrying every post: the Procfile's processes against the fake Slack, which answers
a token it does not know, revoked or deactivated as Slack does."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import aiohttp
import pytest

from runtime.db.local import free_port
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.fake_slack import TOKEN_ERRORS
from tests.support.processes import Process, procfile, wait_for_log, wait_for_status

REFUSAL = "Slack refuses SLACK_BOT_TOKEN ("


async def readyz(port: int) -> tuple[int, dict[str, object]]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, json.loads(await response.text())


@pytest.mark.parametrize("token", ["xoxp-a-user-token", "T0KEN", "xoxb-pasted "])
@pytest.mark.parametrize("process", ["web", "worker"])
async def test_a_token_that_is_not_a_bot_token_stops_the_process(
    deployment: Deployment, tmp_path: Path, process: str, token: str
) -> None:
    env = deployment.env(SLACK_BOT_TOKEN=token)
    started = Process(process, procfile()[process], env, tmp_path)
    deployment.processes.append(started)
    assert await started.wait(timeout=30) == 2
    log = started.log()
    assert (
        "SLACK_BOT_TOKEN is invalid (not a bot token, which starts with xoxb-). Copy the Bot "
        "User OAuth Token (xoxb-...)" in log
    ), log
    assert "Traceback" not in log
    assert deployment.slack.calls == [], "told before asking Slack"


@pytest.mark.parametrize("error", TOKEN_ERRORS)
async def test_a_token_slack_refuses_fails_readiness_of_both_processes(
    deployment: Deployment, error: str
) -> None:
    if error == "invalid_auth":
        env = {"SLACK_BOT_TOKEN": "xoxb-mistyped"}  # a token the fake Slack does not know
    else:
        env = {}
        deployment.slack.token_error = error
    web = await deployment.web(**env)
    metrics_port = free_port()
    worker = deployment.worker("worker.1", METRICS_PORT=str(metrics_port), **env)
    for process, port in ((web, deployment.port), (worker, metrics_port)):
        await wait_for_status(f"http://127.0.0.1:{port}/readyz", process, 503)
        line = await wait_for_log(process, REFUSAL)
        assert f"Slack refuses SLACK_BOT_TOKEN ({error}). Copy the Bot User OAuth Token" in line
        status, body = await readyz(port)
        assert status == 503 and body["ok"] is False
        assert str(body["SLACK_BOT_TOKEN"]).startswith(f"Slack refuses SLACK_BOT_TOKEN ({error})")
    asked = len(deployment.slack.calls_to("auth.test"))
    for _ in range(5):
        await readyz(deployment.port)
        await readyz(metrics_port)
    assert len(deployment.slack.calls_to("auth.test")) == asked, "cached, not asked per probe"
    for process in (web, worker):
        log = process.log()
        assert log.count(REFUSAL) == 1, log
        assert "Traceback" not in log


async def test_with_a_good_token_both_are_ready_and_the_worker_checked_it(
    deployment: Deployment,
) -> None:
    await deployment.web()
    metrics_port = free_port()
    worker = deployment.worker("worker.1", METRICS_PORT=str(metrics_port))
    await wait_for_status(f"http://127.0.0.1:{metrics_port}/readyz", worker, 200)
    await wait_for_log(worker, "Slack: SLACK_BOT_TOKEN is the bot of team")
    assert (await readyz(deployment.port))[0] == 200


def delete_then_answer(request: ModelRequest) -> list[dict[str, object]]:
    if not request.tool_outputs:
        return [tool_call("delete_user", {"user_id": "u-100"}, "c_delete")]
    return [message("deleted")]


async def test_a_revoked_token_holds_the_run_and_a_worker_with_a_good_one_goes_on(
    deployment: Deployment,
) -> None:
    deployment.model.script = delete_then_answer
    await deployment.web()
    first = deployment.worker("worker.1")
    await wait_for_log(first, "Slack: SLACK_BOT_TOKEN is the bot of team")
    # Uninstalled, say, once the run was queued (the web, asked first, would have said "try
    # again": it cannot tell who is asking without the token).
    first.signal(signal.SIGSTOP)
    status, body = await deployment.sender.command("delete u-100")
    assert status == 200 and "Starting" in body["text"], body
    deployment.slack.token_error = "token_revoked"
    first.signal(signal.SIGCONT)
    await wait_for_log(first, REFUSAL)
    # Held: not retried post after post, nor given up and dead-lettered.
    await asyncio.sleep(3 * 1.0)  # three job idle timeouts: a retry or takeover would be in
    assert len(deployment.slack.calls_to("chat.postMessage")) == 1
    assert await deployment.job_owner() == "worker.1", "the job is kept"
    log = first.log()
    assert log.count(REFUSAL) == 1, log
    assert "runs wait where they are; none is lost" in log
    assert "dead-letter" not in log and "Traceback" not in log, log

    # The operator installs the app again and restarts the worker: the run goes on.
    first.stop()
    deployment.slack.token_error = None
    deployment.worker("worker.2")
    [root] = await deployment.slack.wait_for(lambda: deployment.slack.roots(), 30, "root")
    assert root.text == "<@UALICE> asked *ops*: delete u-100"
    await deployment.cards(root, 1)
