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
from bot.console.slack_payloads import element_action
from bot.console.workspace import demo_defaults
from bot.settings import Settings, load_settings, with_console_defaults
from bot.web.app import create_web_app
from bot.worker import slack_worker
from runtime.db.connection import connect
from runtime.db.local import free_port
from runtime.examples.ops import SERVICES
from runtime.policy import load_policy
from runtime.registry import load_registry
from runtime.worker import Worker
from tests.support.declared_asks import DeclaredAsks
from tests.support.harness import Harness

BOT = Path(__file__).resolve().parents[3] / "bot"
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
            self.settings,
            redis=connect(self.redis_url),
            agent_names=self.registry.names,
            policy=load_policy(self.settings),
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
        self.refused += self.slack.refused + self.slack.marked

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

    def cards(self, channel: str = "CDEMO") -> list[Message]:
        """Approval cards in `channel` (the status message's only button is Stop, a grant's
        quiet line's is Revoke)."""
        return [
            m
            for m in self.slack.messages.values()
            if m.channel == channel
            and m.actions()
            and not {"stop_run", "revoke_grant"} & set(m.action_ids())
        ]

    def home(self, user: str) -> str:
        return json.dumps(self.slack.home_tabs.get(user, {}), ensure_ascii=False)

    def answers(self) -> list[str]:
        return [m.text for m in self.slack.messages.values() if m.text.startswith("Scripted")]


@pytest.fixture
async def console(redis_url: str, prefix: str, pretend_world: None) -> AsyncIterator[Console]:
    environ = {
        **demo_defaults(),
        "CONSOLE": "true",
        "PORT": str(free_port()),
        "REDIS_URL": redis_url,
    }
    settings = load_settings(with_console_defaults({**environ, "REDIS_KEY_PREFIX": prefix}))
    asks = DeclaredAsks()
    asks.note(settings.agents)
    async with aiohttp.ClientSession() as session:
        console = Console(settings, redis_url, session)
        await console.start()
        try:
            yield console
        finally:
            await console.stop()
            asks.restore()
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


async def test_greeting_in_spanish_asks_for_the_agent_tool_then_inside_it(
    console: Console,
) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="greet me in spanish")
    [outer] = await console.wait_for(console.cards, "the agent tool's card")
    assert "*ops* wants to run `respond_spanish`" in outer.all_text()
    await console.intent("UBOB", kind="click", message_ts=outer.ts, action_id="approve")

    def inner() -> list[Message]:
        return [c for c in console.cards() if "`get_user_name` asked by" in c.all_text()]

    [card] = await console.wait_for(inner, "the inner agent's card")
    assert "`get_user_name` asked by *spanish*, inside *ops*" in card.all_text()
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "• `respond_spanish`: ¡Hola, Alice!" in answer


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
    assert "rejected by carol. Reason: not during the sale" in answer, "a name, not an id"
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
    sources = list(BOT.rglob("*.py"))
    written = {code for path in sources for code in SHORTCODE.findall(path.read_text())}
    script = (BOT / "console" / "static" / "blocks.js").read_text()
    table = script[
        script.index("const EMOJI = {") : script.index("};", script.index("const EMOJI"))
    ]
    drawn = set(re.findall(r"(\w+): \"", table))
    assert {"alarm_clock", "busts_in_silhouette", "no_entry_sign"} <= written
    assert written - drawn == set(), "add these to EMOJI in blocks.js"


@pytest.mark.parametrize("command", ["/help", "/agents"])
async def test_the_console_sends_only_the_apps_command_and_says_so(
    console: Console, command: str
) -> None:
    status, body = await console.intent("UALICE", kind="command", command=command, text="help")
    assert status == 404
    assert body["error"] == (
        f"The console sends only /agent (the app's one command), not {command}: try /agent help."
    )
    assert console.slack.messages == {} and console.slack.private_notes == []


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
    await console.wait_for(  # stopped once its cards are posted, with a link to each
        lambda: not any(m.streaming for m in console.slack.messages.values()), "stream stopped"
    )
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


# --- the Home tab, direct messages, grants and edits, as the page sends them ----------------------


def block_index(blocks: list[dict[str, Any]], action_id: str, text: str = "") -> int:
    """Where the page would find the element: the first block holding `action_id` (after a
    block that mentions `text`)."""
    after = 0
    if text:
        after = next(i for i, b in enumerate(blocks) if text in json.dumps(b))
    for index, block in enumerate(blocks[after:], start=after):
        elements = block.get("elements", []) if block.get("type") == "actions" else []
        elements = [*elements, *([block["accessory"]] if "accessory" in block else [])]
        if any(e.get("action_id") == action_id for e in elements):
            return index
    raise AssertionError(f"no {action_id} after {text!r}")


async def audit_text(console: Console) -> str:
    """`/agent audit`, as alice reads it in the channel."""
    before = len(console.slack.private_notes)
    await console.intent("UALICE", kind="command", command="/agent", text="audit")
    [note] = await console.wait_for(
        lambda: [n for n in console.slack.private_notes[before:] if "Audit" in n.text], "audit"
    )
    return str(note.text)


def grant_option(card: Message, wording: str) -> str:
    [menu] = [b["accessory"] for b in card.blocks if b.get("block_id") == "grant_menu"]
    [value] = [o["value"] for o in menu["options"] if wording in o["text"]["text"]]
    return str(value)


async def test_the_home_tab_opens_as_in_slack_and_decides_for_the_card(console: Console) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")

    status, _ = await console.intent("UBOB", kind="home")
    assert status == 200
    await console.wait_for(lambda: "restart_service" in console.home("UBOB"), "bob's Home tab")
    blocks = console.slack.home_tabs["UBOB"]["blocks"]
    status, _ = await console.intent(
        "UBOB",
        kind="click",
        home=True,
        block_index=block_index(blocks, "home_approve"),
        action_id="home_approve",
    )
    assert status == 200
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "Restarted api (restart #1)." in answer
    assert "<@UBOB> approved `restart_service`" in card.all_text(), "the card agrees"
    assert card.actions() == []
    await console.wait_for(
        lambda: "restart_service" not in console.home("UBOB"), "bob's tab, republished"
    )


async def test_reject_on_the_home_tab_asks_the_clicker_why(console: Console) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")
    await console.intent("UCAROL", kind="home")
    await console.wait_for(lambda: "home_reject" in console.home("UCAROL"), "carol's tab")
    await console.intent("UCAROL", kind="click", home=True, action_id="home_reject")
    [opened] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the reject modal"
    )
    assert opened.user == "UCAROL", "the modal opens for whoever clicked, from the tab"
    await console.intent(
        "UCAROL",
        kind="submit",
        view_id=opened.id,
        values={"reason": {"reason_input": "not during the sale"}},
    )
    await console.wait_for(lambda: "rejected `restart_service`" in card.all_text(), "the card")
    assert "not during the sale" in card.all_text()
    assert SERVICES["api"] == 0


async def test_a_stop_from_the_home_tab_and_its_private_answer_in_a_direct_message(
    console: Console,
) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")
    await console.intent("UBOB", kind="home")
    await console.wait_for(lambda: console.home("UBOB") != "{}", "bob's Home tab")
    status, _ = await console.intent("UBOB", kind="click", home=True, action_id="home_stop")
    assert status == 404, "bob has no runs, so no Stop on his tab"

    await console.intent("UALICE", kind="home")
    await console.wait_for(lambda: "home_stop" in console.home("UALICE"), "alice's run")
    await console.intent("UALICE", kind="click", home=True, action_id="home_stop")
    await console.wait_for(lambda: "Stopped by" in card.all_text(), "the card, stopped")
    assert card.actions() == []
    assert SERVICES["api"] == 0, "nothing ran"


async def test_a_grant_chosen_from_the_menu_covers_the_next_run_until_revoked(
    console: Console,
) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")
    hour = grant_option(card, "in #demo for 1 hour")
    index = block_index(card.blocks, "approve_with_grant")
    refused = await console.intent(
        "UBOB",
        kind="click",
        message_ts=card.ts,
        block_index=index,
        action_id="approve_with_grant",
        option=hour.replace("3600", "999999"),
    )
    assert refused[0] == 404, "only an option the menu offers"
    status, _ = await console.intent(
        "UBOB",
        kind="click",
        message_ts=card.ts,
        block_index=index,
        action_id="approve_with_grant",
        option=hour,
    )
    assert status == 200
    await console.wait_for(lambda: SERVICES["api"] == 1, "the approved restart")
    assert "Also allowed by <@UBOB>" in card.all_text()

    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    await console.wait_for(lambda: SERVICES["api"] == 2, "the restart the grant covered")
    assert console.cards() == [], "no card for the covered call"
    [quiet] = [m for m in console.slack.messages.values() if "revoke_grant" in m.action_ids()]
    assert "approved by <@UBOB>'s grant" in quiet.text + quiet.all_text()

    await console.intent("UALICE", kind="command", command="/agent", text="grants")
    [listing] = await console.wait_for(
        lambda: [n for n in console.slack.private_notes if n.blocks], "the grants, listed"
    )
    status, _ = await console.intent(
        "UALICE",
        kind="click",
        note_id=listing.id,
        block_index=block_index(listing.blocks, "revoke_grant"),
        action_id="revoke_grant",
    )
    assert status == 200
    await console.wait_for(
        lambda: any(n.text.startswith("Revoked.") for n in console.slack.private_notes),
        "alice is told",
    )
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    await console.wait_for(console.cards, "a card again")
    assert SERVICES["api"] == 2
    audit = await audit_text(console)
    steps = ("*granted* `restart_service` by <@UBOB>", "*approved by a grant*", "*grant revoked*")
    for step in steps:
        assert step in audit, step


async def test_an_edit_in_the_modal_shows_errors_then_approves_the_edited_call(
    console: Console,
) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="refund o-5521 1200")
    [card] = await console.wait_for(console.cards, "a card")
    [copy] = await console.wait_for(lambda: console.cards("DUCAROL"), "carol's copy, in a DM")
    seen = await console.intent("UBOB", kind="click", message_ts=copy.ts, action_id="approve")
    assert seen[0] == 404, "a direct message is only its person's to click"
    status, _ = await console.intent(
        "UBOB",
        kind="click",
        message_ts=card.ts,
        block_index=block_index(card.blocks, "edit_arguments"),
        action_id="edit_arguments",
    )
    assert status == 200
    [opened] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the edit modal"
    )
    assert opened.user == "UBOB"
    [field] = [b["element"] for b in opened.view["blocks"] if b["type"] == "input"]
    assert json.loads(field["initial_value"]) == {"order_id": "o-5521", "amount_cents": 1200}

    for typed in ('{"order_id": "o-5521", "amount_cents": 900', '{"order_id": "o-5521"}'):
        await console.intent(
            "UBOB",
            kind="submit",
            view_id=opened.id,
            values={"arguments": {"arguments_input": typed}},
        )
        assert opened.open and set(opened.errors) == {"arguments"}, typed
    assert console.answers() == [] and "Edited" not in card.all_text(), "nothing was recorded"

    await console.intent(
        "UBOB",
        kind="submit",
        view_id=opened.id,
        values={"arguments": {"arguments_input": '{"order_id": "o-5521", "amount_cents": 900}'}},
    )
    assert not opened.open
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "`refund_order`: (with the edited arguments) Refunded 9.00 on order o-5521" in answer
    assert "not with the arguments you sent" not in answer, "the note is for the model only"
    previewed = "Would refund 9.00 of 48.00 to Grace Hopper's Visa ending 4242"
    for shown in (card, copy):
        assert "Edited and approved by <@UBOB>" in shown.all_text()
        assert "`1200` → `900`" in shown.all_text()
        assert f"*Preview of the edited call*\\n{previewed}" in shown.all_text()
    thread = [m.text for m in console.slack.messages.values() if m.thread_ts == card.thread_ts]
    assert any(t.startswith(":eyes:") and previewed in t for t in thread), thread
    audit = await audit_text(console)
    edited = r"\*edited\* `refund_order` by <@UBOB> run `\S+` digest `sha256:[0-9a-f]{16}`"
    assert re.search(edited, audit)


@pytest.mark.parametrize(
    "intent",
    [
        {"kind": "click", "action_id": "approve"},
        {"kind": "click", "message_ts": "1.1", "home": True, "action_id": "approve"},
        {"kind": "click", "home": True, "action_id": "home_approve"},
        {"kind": "click", "note_id": "N1", "action_id": "revoke_grant"},
    ],
    ids=["nowhere", "two-places", "no-home-tab-yet", "no-such-note"],
)
async def test_clicks_on_nothing_are_refused(console: Console, intent: dict[str, Any]) -> None:
    status, _ = await console.post_intent({"user": "UALICE", **intent})
    assert status in (400, 404)
    assert console.slack.messages == {}


@pytest.mark.parametrize("kind", ["static_select", "overflow"])
def test_a_menu_choice_is_sent_as_slack_sends_it(kind: str) -> None:
    options = [
        {"text": {"type": "plain_text", "text": "for 1 hour"}, "value": "r:a:tool:3600"},
        {"text": {"type": "plain_text", "text": "for 8 hours"}, "value": "r:a:tool:28800"},
    ]
    menu = {"type": kind, "action_id": "approve_with_grant", "options": options}
    action = element_action(menu, "grant_menu", "r:a:tool:28800")
    assert action["type"] == kind and action["block_id"] == "grant_menu"
    assert action["selected_option"] == options[1]
    assert "value" not in action, "a menu's choice is its selected option"
    with pytest.raises(ValueError, match="not an option"):
        element_action(menu, "grant_menu", "r:a:tool:999999")


async def test_what_real_slack_would_refuse_shows_on_the_page(console: Console) -> None:
    bad = {"channel": "CDEMO", "text": "x", "blocks": [{"type": "section"}]}
    async with console.session.post(
        f"{console.url}/console/api/chat.postMessage",
        json=bad,
        headers={"Authorization": f"Bearer {console.slack.token}"},
    ) as response:
        assert (await response.json())["error"] == "invalid_blocks"
    async with console.session.get(f"{console.url}/console/stream") as response:
        snapshot = json.loads((await response.content.readline()).decode().removeprefix("data: "))
    assert snapshot["refusals"] == 1
    assert snapshot["refused"][0]["method"] == "chat.postMessage"
    console.slack.refused.clear()  # made on purpose: the fixture fails on any other


async def test_a_refund_over_the_limit_needs_two_people(console: Console) -> None:
    """The README's tour: the demo's policy has a `when` rule for refunds over $1,000."""
    text = "refund o-7788 150000"
    await console.intent("UALICE", kind="command", command="/agent", text=text)
    [card] = await console.wait_for(console.cards, "a card")
    assert "Rule: refunds over $1,000" in card.all_text(), "the rule's name"
    assert "0 of 2 approvals" in card.all_text()
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    await console.wait_for(lambda: "1 of 2 approvals" in card.all_text(), "bob's approval")
    assert console.answers() == []
    await console.intent("UCAROL", kind="click", message_ts=card.ts, action_id="approve")
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "Refunded 1500.00 on order o-7788" in answer


async def test_approve_all_decides_both_calls_of_a_run_in_one_modal(console: Console) -> None:
    """The README's tour: a run that asks twice offers **Approve all** on its status message."""
    text = "delete u-101 and restart search"
    await console.intent("UALICE", kind="command", command="/agent", text=text)
    cards = await console.wait_for(lambda: c if len(c := console.cards()) == 2 else None, "cards")
    [status] = await console.wait_for(
        lambda: [m for m in console.slack.messages.values() if "approve_all" in m.action_ids()],
        "Approve all on the status message",
    )
    await console.intent("UBOB", kind="click", message_ts=status.ts, action_id="approve_all")
    [opened] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the Approve all modal"
    )
    assert opened.view["callback_id"] == "batch_decision"
    listed = json.dumps(opened.view)
    assert "delete_user" in listed and "restart_service" in listed
    code, _ = await console.intent("UBOB", kind="submit", view_id=opened.id, values={})
    assert code == 200 and not opened.open
    await console.wait_for(
        lambda: all("approve" not in c.action_ids() for c in cards), "both cards decided"
    )
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "u-101" in answer and "search" in answer, answer


async def test_a_reply_in_the_thread_continues_the_run_there(console: Console) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="delete u-100")
    [card] = await console.wait_for(console.cards, "a card")
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    await console.wait_for(console.answers, "the answer")
    root = console.slack.messages[str(card.thread_ts)]

    status, _ = await console.intent(
        "UCAROL", kind="reply", thread_ts=root.ts, text="now delete u-101"
    )
    assert status == 200
    [mine] = [m for m in console.slack.messages.values() if m.user == "UCAROL"]
    assert (mine.thread_ts, mine.text) == (root.ts, "now delete u-101"), "shown as carol's"
    [second] = await console.wait_for(console.cards, "the reply's card")
    assert second.ts != card.ts and second.thread_ts == root.ts
    assert "u-101" in second.all_text()
    status, _ = await console.intent("UBOB", kind="reply", thread_ts="1.000001", text="hi")
    assert status == 404, "no such thread"


async def test_slacks_own_stop_on_a_processing_session_stops_the_run(console: Console) -> None:
    """The console draws each run's agent session, and Slack's Stop while it is processing
    sends `agent_session_stopped`, which stops the run as our Stop does."""
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")
    [root] = [m for m in console.slack.messages.values() if m.ts == card.thread_ts]
    session = await console.wait_for(
        lambda: console.slack.agents.session(root.channel, root.ts), "the run's session"
    )
    assert session.title == "restart the api"
    # Suspended once the cards are posted and the stretch's stream stopped with their links.
    await console.wait_for(lambda: session.status == "suspended", "the session suspended")
    snapshot = console.slack.snapshot()
    assert snapshot["sessions"][root.ts]["status"] == "suspended"
    status, _ = await console.intent("UALICE", kind="stop_session", thread_ts=root.ts)
    assert status == 404, "Slack shows its Stop only while the agent is processing"
    streamed = [m for m in console.slack.messages.values() if m.streamed]
    assert streamed and streamed[0].tasks, "the run's progress streams as tasks"

    session.status = "processing"  # as Slack shows it while the agent works
    status, _ = await console.intent("UALICE", kind="stop_session", thread_ts=root.ts)
    assert status == 200
    await console.wait_for(lambda: "Stopped by" in card.all_text(), "the card, stopped")
    assert card.actions() == []
    await console.wait_for(lambda: session.status == "closed", "the session closed")
    assert SERVICES["api"] == 0, "nothing ran"
