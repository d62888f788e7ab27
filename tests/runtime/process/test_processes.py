"""The Procfile's `web` and `worker`, as real processes: restarts and a killed worker."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import aiohttp

from runtime.db.local import free_port
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import (
    Process,
    procfile,
    wait_for_lines,
    wait_for_log,
    wait_until_healthy,
    within_ceilings,
)


async def test_both_processes_restart_while_an_approval_waits(deployment: Deployment) -> None:
    deployment.model.script = delete_then_answer
    web = await deployment.web()
    worker = deployment.worker("worker.1")
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)

    web.signal(signal.SIGTERM)
    worker.signal(signal.SIGTERM)
    assert await web.wait(timeout=30) == 0, web.log()
    assert await worker.wait(timeout=30) == 0, worker.log()

    await deployment.web()
    deployment.worker("worker.1")
    status, _ = await deployment.sender.click(card, "approve", user="UBOB")
    assert status == 200
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    assert "<@UBOB> approved `delete_user`" in card.all_text()


async def test_a_worker_killed_mid_run_is_replaced_by_another(deployment: Deployment) -> None:
    first_call = asyncio.Event()

    async def slow_first_call(request: ModelRequest) -> list[dict[str, object]]:
        if len(deployment.model.requests) == 1:
            first_call.set()
            await asyncio.sleep(30)  # the worker waiting for this is killed meanwhile
        return delete_then_answer(request)

    deployment.model.script = slow_first_call
    await deployment.web()
    workers = {name: deployment.worker(name) for name in ("worker.1", "worker.2")}
    root = await deployment.start_run("delete u-100")
    await asyncio.wait_for(first_call.wait(), timeout=20)
    owner = await deployment.job_owner()
    assert owner in workers, deployment.logs_text()
    workers[owner].signal(signal.SIGKILL)

    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    await deployment.jobs_done()
    assert len(deployment.slack.roots()) == 1
    assert len(deployment.slack.final_answers(root.ts)) == 1
    assert len(deployment.slack.cards()) == 1


async def test_the_bundled_agents_use_the_openai_settings_of_the_environment(
    deployment: Deployment,
) -> None:
    def restart_api(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("restart_service", {"service": "api"}, "c1")]
        return [message(request.tool_outputs["c1"])]

    deployment.model.script = restart_api
    process = Process("web", procfile()["web"], deployment.env(AGENTS=""), deployment.logs)
    deployment.processes.append(process)
    await wait_until_healthy(f"http://127.0.0.1:{deployment.port}/healthz", process)
    worker = Process("worker.1", procfile()["worker"], deployment.env(AGENTS=""), deployment.logs)
    deployment.processes.append(worker)

    root = await deployment.start_run("restart the api")
    [card] = await deployment.cards(root, 1)
    assert "*ops* wants to run `restart_service`" in card.all_text()
    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "Restarted api (restart #1)."
    assert {r.authorization for r in deployment.model.requests} == {"Bearer sk-test"}
    assert "restart_service" in deployment.model.requests[0].tools


async def test_a_missing_setting_stops_the_process_with_the_fix(
    deployment: Deployment, tmp_path: Path
) -> None:
    env = deployment.env(SLACK_SIGNING_SECRET="", APPROVAL_TTL_SECONDS="soon")
    process = Process("web-misconfigured", procfile()["web"], env, tmp_path)
    deployment.processes.append(process)
    assert await process.wait(timeout=20) == 2
    log = process.log()
    assert "SLACK_SIGNING_SECRET is not set. Copy the Signing Secret" in log
    assert "APPROVAL_TTL_SECONDS is invalid" in log
    assert "Traceback" not in log


async def test_the_web_process_says_once_where_it_listens_and_nothing_of_tokens(
    deployment: Deployment,
) -> None:
    web = await deployment.web()
    log = web.log()
    where = f"web: listening on http://0.0.0.0:{deployment.port} (Slack's requests at /slack/events"
    assert log.count(where) == 1, log
    assert "will be unused" not in log, "Bolt is given our client on purpose"


async def test_a_web_process_without_console_serves_no_console(deployment: Deployment) -> None:
    await deployment.web()
    url = f"http://127.0.0.1:{deployment.port}"
    async with aiohttp.ClientSession() as session:
        for path in ("/console", "/console/stream", "/console/api/auth.test"):
            async with session.get(f"{url}{path}") as response:
                assert response.status == 404, path
        async with session.get(f"{url}/healthz") as response:
            assert response.status == 200


async def test_without_redis_the_home_tab_watch_backs_off_as_the_connection_does(
    deployment: Deployment, tmp_path: Path
) -> None:
    env = deployment.env(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    web = Process("web-without-redis", procfile()["web"], env, tmp_path)
    deployment.processes.append(web)
    # The connection's own message: waits up to 1, 2, 4 and 8 s.
    lines = await wait_for_lines(web, "cannot reach Redis", 4, timeout=30)
    assert within_ceilings(lines, [1, 2, 4, 8]), lines
    home = await wait_for_lines(web, "home tabs:", 3, timeout=30)
    assert within_ceilings(home, [1, 2, 4]), home
    every = [line for line in web.log().splitlines() if "home tabs:" in line]
    assert len(every) <= 5, "\n".join(every)


async def test_a_bot_token_slack_refuses_is_one_line_naming_it(deployment: Deployment) -> None:
    deployment.slack.fail_next("auth.test", 200, {"ok": False, "error": "invalid_auth"})
    web = await deployment.web()
    line = await wait_for_log(web, "SLACK_BOT_TOKEN")
    assert "Slack refuses SLACK_BOT_TOKEN (invalid_auth). Copy the Bot User OAuth Token" in line
    assert len(deployment.slack.calls_to("auth.test")) == 1, "refused: not asked again"
    log = web.log()
    assert log.count("SLACK_BOT_TOKEN") == 1, log
    assert "Traceback" not in log


async def test_with_slack_unreachable_a_command_is_answered_within_slacks_3_s(
    deployment: Deployment,
) -> None:
    web = await deployment.web(SLACK_API_URL=f"http://127.0.0.1:{free_port()}/api/")
    began = time.monotonic()
    status, body = await deployment.sender.command("delete u-100", user="UALICE")
    assert (status, time.monotonic() - began < 3.0) == (200, True), body
    # The token's check waits and asks again, backing off, outside any request.
    lines = await wait_for_lines(web, "cannot reach Slack to check SLACK_BOT_TOKEN", 2, timeout=20)
    assert within_ceilings(lines, [1, 2]), lines
    assert "Traceback" not in web.log(), web.log()


async def test_the_console_will_not_start_with_a_real_slack_app(
    deployment: Deployment, tmp_path: Path
) -> None:
    env = deployment.env(CONSOLE="true")  # and the Slack app's token and secret, as deployed
    process = Process("web-console", procfile()["web"], env, tmp_path)
    deployment.processes.append(process)
    assert await process.wait(timeout=20) == 2
    log = process.log()
    assert "CONSOLE=true cannot be used with SLACK_BOT_TOKEN set" in log
    assert "Traceback" not in log


async def test_the_demo_ignores_slack_credentials_in_the_shell(
    deployment: Deployment, tmp_path: Path
) -> None:
    env = {
        **deployment.env(),
        "SLACK_APP_TOKEN": "xapp-from-the-shell",
        "OPENAI_API_KEY": "",
        "AGENTS": "",
    }
    demo = Process("demo", "python -m bot demo", env, tmp_path)
    deployment.processes.append(demo)
    url = f"http://127.0.0.1:{deployment.port}"
    await wait_until_healthy(f"{url}/healthz", demo)
    async with aiohttp.ClientSession() as session, session.get(f"{url}/console") as response:
        assert response.status == 200
    demo.signal(signal.SIGINT)
    assert await demo.wait(timeout=30) == 0, demo.log()
    assert deployment.slack.calls == [], "the demo never called the Slack it was given"
