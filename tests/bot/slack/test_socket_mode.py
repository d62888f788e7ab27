"""Socket Mode: Slack's requests over a WebSocket the web process opens; /healthz stays on HTTP.

The fake Slack answers `apps.connections.open` with the URL of its own WebSocket, says hello,
and sends envelopes the way Slack does; the bot acknowledges each one on the socket.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
import pytest
from aiohttp import web

from bot.console.slack_payloads import new_trigger, slash_command_form
from bot.words.members import OTHER_WORKSPACE
from runtime.db.local import free_port
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_slack import FakeSlack
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import wait_for_lines, wait_for_log, within_ceilings

APP_TOKEN = "xapp-1-test"


class SocketSlack(FakeSlack):
    def __init__(self) -> None:
        super().__init__()
        self.sockets: list[web.WebSocketResponse] = []
        self.acks: list[dict[str, Any]] = []
        self.extra_routes.append(web.get("/link", self._link))
        self._envelopes = itertools.count(1)

    def answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "apps.connections.open":
            return {"ok": True, "url": self.url.replace("http://", "ws://") + "/link"}
        return super().answer(method, args)

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self.sockets.append(socket)
        await socket.send_json({"type": "hello", "num_connections": 1})
        await self.notify()
        async for frame in socket:
            if frame.type == aiohttp.WSMsgType.TEXT:
                self.acks.append(json.loads(frame.data))
                await self.notify()
        return socket

    async def deliver(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send one envelope on the open socket; return the bot's acknowledgement."""
        envelope_id = f"env-{next(self._envelopes)}"
        await self.sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": 0,
                "retry_reason": "",
            }
        )
        acks = await self.wait_for(
            lambda: [a for a in self.acks if a.get("envelope_id") == envelope_id],
            what=f"ack of {envelope_id}",
        )
        return acks[0]  # type: ignore[no-any-return]


@pytest.fixture
async def socket_bot(redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    agents.EXECUTIONS.clear()
    harness = Harness(redis_url=redis_url, prefix=prefix, env={"SLACK_APP_TOKEN": APP_TOKEN})
    harness.slack = SocketSlack()
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


async def test_a_command_and_a_click_over_the_socket_run_the_loop(socket_bot: Harness) -> None:
    slack = socket_bot.slack
    assert isinstance(slack, SocketSlack)
    await slack.wait_for(lambda: slack.sockets, what="the web process to connect")
    assert len(slack.calls_to("apps.connections.open")) == 1
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{socket_bot.web_url}/healthz") as response,
    ):
        assert response.status == 200, "health over HTTP while in Socket Mode"
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{socket_bot.web_url}/readyz") as response,
    ):
        assert (response.status, (await response.json())["socket_mode"]) == (200, "connected")

    socket_bot.model.script = delete_then_answer
    form = slash_command_form(
        text="delete u-100",
        user="UALICE",
        channel="CGENERAL",
        response_url=slack.response_url("UALICE"),
        trigger_id=new_trigger(),
    )
    ack = await slack.deliver("slash_commands", dict(parse_qsl(form)))
    assert ack["payload"]["text"].startswith("Starting *ops* on your task")

    [root] = await slack.wait_for(lambda: slack.roots(), what="root message")
    [card] = await socket_bot.cards(root, 1)
    click = socket_bot.sender.click_payload(card, "approve", user="UBOB")
    ack = await slack.deliver("interactive", click)
    assert ack == {"envelope_id": ack["envelope_id"]}, "an empty acknowledgement"

    answer = await socket_bot.final_answer(root)
    assert answer.text == "done: deleted u-100"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert "<@UBOB> approved" in card.all_text()


async def test_a_command_of_another_installation_over_the_socket_starts_nothing(
    socket_bot: Harness,
) -> None:
    """The same check as over HTTP (`bot.web.installation`), in a Bolt middleware."""
    slack = socket_bot.slack
    assert isinstance(slack, SocketSlack)
    await slack.wait_for(lambda: slack.sockets, what="the web process to connect")
    form = dict(
        parse_qsl(
            slash_command_form(
                text="delete u-100",
                user="UALICE",
                channel="CGENERAL",
                response_url=slack.response_url("UALICE"),
                trigger_id=new_trigger(),
            )
        )
    )
    ack = await slack.deliver("slash_commands", {**form, "team_id": "T0OTHER"})
    assert ack["payload"]["text"] == OTHER_WORKSPACE
    assert slack.calls_to("chat.postMessage") == []


async def readyz(deployment: Deployment) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{deployment.port}/readyz") as response,
    ):
        return response.status, await response.json()


async def test_a_refused_app_token_is_one_line_naming_it_and_health_is_served(
    deployment: Deployment,
) -> None:
    deployment.slack.fail_next("apps.connections.open", 200, {"ok": False, "error": "invalid_auth"})
    web = await deployment.web(SLACK_APP_TOKEN="xapp-revoked")  # waits for /healthz: 200
    line = await wait_for_log(web, "SLACK_APP_TOKEN")
    assert "Slack refuses SLACK_APP_TOKEN (invalid_auth). Create an app-level token" in line
    status, body = await readyz(deployment)
    assert (status, body["ok"], body["socket_mode"]) == (503, False, "refused")
    assert len(deployment.slack.calls_to("apps.connections.open")) == 1, "not asked again"
    log = web.log()
    assert log.count("SLACK_APP_TOKEN") == 1, log
    assert "Traceback" not in log


async def test_with_slack_unreachable_socket_mode_retries_with_a_backoff(
    deployment: Deployment,
) -> None:
    web = await deployment.web(
        SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=f"http://127.0.0.1:{free_port()}/api/"
    )
    status, body = await readyz(deployment)
    assert (status, body["socket_mode"]) == (503, "connecting"), "healthy, not ready"
    lines = await wait_for_lines(
        web, "Socket Mode: cannot reach Slack (ClientConnectorError); retrying in", 2, timeout=20
    )
    assert within_ceilings(lines, [1, 2]), lines
    assert "Traceback" not in web.log(), web.log()
