"""The local console over HTTP: what the page posts goes through the same handlers as Slack."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web

from bot.console.local_slack import LocalSlack, Message
from bot.console.routes import LOCAL_SLACK
from bot.console.slack_limits import Refusal
from bot.settings import Settings, load_settings, with_console_defaults
from bot.slack_worker import slack_worker
from bot.web import create_web_app
from runtime.examples.ops import SERVICES
from runtime.local_redis import free_port
from runtime.policy import load_policy
from runtime.redis_connection import connect
from runtime.registry import load_registry
from runtime.worker import Worker
from tests.harness import Harness

BOT = Path(__file__).resolve().parent.parent / "bot"
SHORTCODE = re.compile(r":([a-z][a-z0-9_+-]*):")


class Console:
    """The web process with CONSOLE=true and a worker, as `python -m bot demo` wires them."""

    def __init__(self, settings: Settings, redis_url: str, session: aiohttp.ClientSession) -> None:
        self.settings = settings
        self.registry = load_registry(settings.agents)
        self.redis_url = redis_url
        self.url = f"http://127.0.0.1:{settings.port}"
        self.session = session
        self.slack = LocalSlack()
        self.refused: list[Refusal] = []
        self._runner: web.AppRunner | None = None
        self._worker: tuple[Worker, asyncio.Task[None], aioredis.Redis] | None = None

    async def start(self) -> None:
        app = await create_web_app(
            self.settings, redis=connect(self.redis_url), agent_names=self.registry.names
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.settings.port).start()
        self.slack = app[LOCAL_SLACK]
        worker_redis = connect(self.redis_url)
        worker = slack_worker(
            self.settings,
            redis=worker_redis,
            session=self.session,
            registry=self.registry,
            policy=load_policy(self.settings),
            name="console-worker",
            poll_interval=0.1,
        )
        task = asyncio.get_running_loop().create_task(worker.run())
        self._worker = (worker, task, worker_redis)

    async def stop(self) -> None:
        if self._worker is not None:
            worker, task, worker_redis = self._worker
            worker.stop()
            await asyncio.wait_for(task, timeout=30)
            await worker_redis.aclose()
        if self._runner is not None:
            await self._runner.cleanup()
        self.refused += self.slack.refused

    async def restart(self) -> None:
        """Ctrl-C and start the demo again: a new stand-in Slack, the same Redis."""
        await self.stop()
        await self.start()

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    async def intent(self, user: str, **intent: Any) -> tuple[int, dict[str, Any]]:
        return await self.post_intent({"user": user, **intent})

    async def post_intent(
        self, body: dict[str, Any], headers: dict[str, str | None] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Post as the console's page does (JSON, from its own origin), but for `headers`
        (None: leave that header out)."""
        chosen = {"Content-Type": "application/json", "Origin": self.url, **(headers or {})}
        sent = {name: value for name, value in chosen.items() if value is not None}
        async with self.session.post(
            f"{self.url}/console/intents", data=json.dumps(body), headers=sent
        ) as response:
            return response.status, await response.json()

    async def wait_for(self, predicate: Any, what: str, timeout: float = 10) -> Any:
        async with asyncio.timeout(timeout):
            while not (value := predicate()):
                await self.slack.wait_for_change(self.slack.version)
        assert value, what
        return value

    async def user_name(self, user: str) -> str:
        async with self.session.get(
            f"{self.url}/console/api/users.info",
            params={"user": user},
            headers={"Authorization": f"Bearer {self.slack.token}"},
        ) as response:
            answer = await response.json()
        return str(answer["user"]["profile"]["display_name"])

    def cards(self) -> list[Message]:
        """Approval cards (the status message's only button is Stop)."""
        return [
            m
            for m in self.slack.messages.values()
            if m.actions() and "stop_run" not in m.action_ids()
        ]

    def answers(self) -> list[str]:
        return [m.text for m in self.slack.messages.values() if m.text.startswith("Scripted")]


@pytest.fixture
async def console(redis_url: str, prefix: str, pretend_world: None) -> AsyncIterator[Console]:
    environ = {"CONSOLE": "true", "PORT": str(free_port()), "REDIS_URL": redis_url}
    settings = load_settings(with_console_defaults({**environ, "REDIS_KEY_PREFIX": prefix}))
    async with aiohttp.ClientSession() as session:
        console = Console(settings, redis_url, session)
        await console.start()
        try:
            yield console
        finally:
            await console.stop()
    assert console.refused == [], "real Slack would have refused these"


async def test_a_typed_command_reaches_a_card_and_a_click_approves_it(console: Console) -> None:
    status, result = await console.intent(
        "UALICE", kind="command", command="/agent", text="delete u-100"
    )
    assert status == 200
    assert result["answer"]["text"].startswith("Starting *ops* on your task")
    [card] = await console.wait_for(console.cards, "a card")
    assert "*ops* wants to run `delete_user`" in card.all_text()
    [note] = [n for n in console.slack.private_notes if n.user == "UALICE"]
    assert note.text.startswith("Starting *ops*"), "the command's reply, for alice only"
    assert await console.user_name("UBOB") == "bob", "the console's people are Slack users"

    status, _ = await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    assert status == 200
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "Deleted user u-100 (Ada Lovelace)." in answer
    assert "<@UBOB> approved `delete_user`" in card.all_text()
    assert card.actions() == []


async def test_reject_opens_the_modal_for_the_clicker_and_needs_a_reason(console: Console) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")
    await console.intent("UCAROL", kind="click", message_ts=card.ts, action_id="reject")
    [opened] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the reject modal"
    )
    assert opened.user == "UCAROL"
    assert opened.view["callback_id"] == "reject_reason"

    status, result = await console.intent(
        "UCAROL", kind="submit", view_id=opened.id, values={"reason": {"reason_input": " "}}
    )
    assert status == 200
    assert result["answer"]["response_action"] == "errors"
    assert opened.open and opened.errors == {
        "reason": "Please say why, so the agent can explain it."
    }

    await console.intent(
        "UCAROL",
        kind="submit",
        view_id=opened.id,
        values={"reason": {"reason_input": "not during the sale"}},
    )
    assert not opened.open
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "rejected by carol (UCAROL). Reason: not during the sale" in answer
    assert SERVICES["api"] == 0


async def test_the_stream_sends_a_snapshot_with_the_model_in_use(console: Console) -> None:
    async with console.session.get(f"{console.url}/console/stream") as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        line = await response.content.readline()
    snapshot = json.loads(line.decode().removeprefix("data: "))
    assert snapshot["config"]["model"] == "scripted"
    assert [p["id"] for p in snapshot["config"]["people"]] == ["UALICE", "UBOB", "UCAROL"]
    assert snapshot["messages"] == []


@pytest.mark.parametrize(
    ("intent", "status"),
    [
        ({"user": "UMALLORY", "kind": "command", "command": "/agent", "text": "x"}, 404),
        ({"user": "UALICE", "kind": "click", "message_ts": "1.1", "action_id": "approve"}, 404),
        ({"user": "UALICE", "kind": "submit", "view_id": "V9"}, 404),
        ({"user": "UALICE", "kind": "delete everything"}, 400),
    ],
    ids=["unknown-person", "unknown-message", "unknown-modal", "unknown-kind"],
)
async def test_intents_about_nothing_are_refused(
    console: Console, intent: dict[str, Any], status: int
) -> None:
    assert (await console.post_intent(intent))[0] == status
    assert console.slack.messages == {}


COMMAND = {"user": "UALICE", "kind": "command", "command": "/agent", "text": "delete u-100"}


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": None},
        {"Origin": "null"},
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Host": "evil.example:{port}", "Origin": "http://evil.example:{port}"},
        {"Host": "127.0.0.1.evil.example:{port}", "Origin": "http://127.0.0.1.evil.example:{port}"},
    ],
    ids=[
        "another-site",
        "no-origin",
        "opaque-origin",
        "text-plain",
        "form-post",
        "dns-rebinding",
        "lookalike-host",
    ],
)
async def test_intents_from_anywhere_but_the_console_page_are_refused(
    console: Console, headers: dict[str, str | None]
) -> None:
    port = console.url.rsplit(":", 1)[1]
    sent = {name: value and value.format(port=port) for name, value in headers.items()}
    status, answer = await console.post_intent(COMMAND, sent)
    assert status == 403
    assert set(answer) == {"error"}
    await asyncio.sleep(0.2)
    assert console.slack.messages == {}, "nothing was played into /slack/events"


@pytest.mark.parametrize(
    "path", ["/console", "/console/stream", "/console/api/auth.test", "/console/static/console.js"]
)
async def test_a_page_under_another_host_name_gets_nothing(console: Console, path: str) -> None:
    port = console.url.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "evil.example", f"localhost.evil.example:{port}"):
        async with console.session.get(
            f"{console.url}{path}",
            headers={"Host": host, "Authorization": f"Bearer {console.slack.token}"},
        ) as response:
            assert response.status == 403, (path, host)
            assert "error" in await response.json()


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "[::1]"])
async def test_the_console_answers_on_every_loopback_name(console: Console, name: str) -> None:
    port = console.url.rsplit(":", 1)[1]
    host = f"{name}:{port}"
    async with console.session.get(f"{console.url}/console", headers={"Host": host}) as response:
        assert response.status == 200
    status, answer = await console.post_intent(COMMAND, {"Host": host, "Origin": f"http://{host}"})
    assert status == 200, answer


async def test_slack_events_still_need_slacks_signature(console: Console) -> None:
    async with console.session.post(
        f"{console.url}/slack/events", data="command=/agent&text=delete+u-100"
    ) as response:
        assert response.status == 401


async def test_the_console_is_off_unless_enabled(bot: Harness) -> None:
    async with aiohttp.ClientSession() as session:
        for path in ("/console", "/console/stream", "/console/api/chat.postMessage"):
            async with session.get(f"{bot.web_url}{path}") as response:
                assert response.status in (404, 405), path
        async with session.post(f"{bot.web_url}/console/intents", json={}) as response:
            assert response.status == 404


def test_every_emoji_the_bot_writes_is_drawn_by_the_console() -> None:
    sources = [*BOT.glob("*.py"), *BOT.glob("console/*.py")]
    written = {code for path in sources for code in SHORTCODE.findall(path.read_text())}
    script = (BOT / "console" / "static" / "console.js").read_text()
    table = script[
        script.index("const EMOJI = {") : script.index("};", script.index("const EMOJI"))
    ]
    drawn = set(re.findall(r"(\w+): \"", table))
    assert {"alarm_clock", "busts_in_silhouette", "no_entry_sign"} <= written
    assert written - drawn == set(), "add these to EMOJI in console.js"


async def test_a_command_longer_than_slack_takes_is_not_sent(console: Console) -> None:
    async with console.session.get(f"{console.url}/console/stream") as response:
        snapshot = json.loads((await response.content.readline()).decode().removeprefix("data: "))
    limit = snapshot["config"]["command_limit"]
    assert limit == 4000, "the page stops longer commands itself, keeping what was typed"
    status, _ = await console.intent(
        "UALICE", kind="command", command="/agent", text="delete u-100 " + "x" * limit
    )
    assert status == 400
    assert console.slack.messages == {} and console.slack.private_notes == []


async def test_restarting_the_demo_keeps_a_waiting_card_whose_buttons_still_work(
    console: Console,
) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="delete u-100")
    [card] = await console.wait_for(console.cards, "a card")
    before = {m.ts: m.all_text() for m in console.slack.messages.values()}

    await console.restart()
    assert {m.ts: m.all_text() for m in console.slack.messages.values()} == before
    [note] = console.slack.private_notes
    assert note.text.startswith("Starting *ops*"), "alice's private note came back too"

    status, _ = await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    assert status == 200
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "Deleted user u-100 (Ada Lovelace)." in answer
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    await console.wait_for(lambda: len(console.cards()) == 1, "a second card")
    assert min(m.ts for m in console.cards()) > card.ts, "new messages come after restored ones"
