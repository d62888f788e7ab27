"""A stand-in for the Slack Web API on localhost: keeps one workspace's messages in memory.

The console's web process serves it under `/console/`; both Countersign processes point their
real `slack_sdk` client at it (`Settings.effective_slack_api_url`), so every card, update,
ephemeral note and modal goes through the same code as in Slack. The tests' fake Slack is this
class plus failure injection.

It implements what Countersign calls: `auth.test`, `chat.postMessage`, `chat.update`,
`chat.postEphemeral`, `views.open`, `views.publish` (Home tabs), `conversations.open` (a direct
message's channel is `D` + the user id), agent sessions and streamed messages
(`bot.console.agent_surface`), who is who (`bot.console.local_directory`: `users.info`,
`conversations.info`, `conversations.members`, `usergroups.list`, `usergroups.users.list`), and
`response_url` posts. Anything else answers `unknown_method`, as
Slack would for a typo.
What real Slack would refuse (`bot.console.slack_limits`: blocks and views judged by
`slack_sdk`'s models) is refused the same way, logged, and kept in `refused`, so a test or the
console's log shows it at once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from aiohttp import web

from bot.console.agent_surface import AGENT_METHODS, AgentSurface
from bot.console.local_directory import BOT_USER, TEAM, LocalDirectory
from bot.console.slack_limits import Refusal, plain_text_marks, refusal

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 500
"""Messages kept; older ones are dropped (a console runs for hours at most)."""
REFUSALS_SHOWN = 3
"""The latest calls real Slack would have refused, shown on the console's page."""
_note_ids = itertools.count(1)


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    updates: int = 0
    user: str | None = None
    """Who wrote it, for a person's message (a reply in a thread); None: the app."""
    tasks: list[dict[str, Any]] = field(default_factory=list)
    """A streamed message's tasks (`task_update` chunks, the latest of each id)."""
    streaming: bool = False
    """Still streaming (`bot.console.agent_surface`): appends land on it."""
    streamed: bool = False
    """Started as a stream (a run's progress), whether or not it still streams."""
    recipient: str | None = None
    """A stream in a channel: the person it is addressed to."""

    def actions(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b["elements"]]

    def action_ids(self) -> list[str]:
        return [e["action_id"] for e in self.actions()]

    def is_question(self) -> bool:
        """It shows an MCP server's question (`bot.blocks.questions`)."""
        return any(b.get("block_id") == "question" for b in self.blocks)

    def all_text(self) -> str:
        """Everything a reader sees on the message, flattened."""
        parts = [self.text]
        for block in self.blocks:
            parts.append(json.dumps(block, ensure_ascii=False))
        return "\n".join(parts)


@dataclass
class Note:
    """Something only one person sees: an ephemeral message or a reply to their command."""

    user: str
    channel: str | None
    thread_ts: str | None
    text: str
    at: float = field(default_factory=time.time)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    """Its Block Kit, when it has any (`/agent grants` lists grants with **Revoke**)."""
    id: str = field(default_factory=lambda: f"N{time.time_ns()}.{next(_note_ids)}")


@dataclass
class OpenedView:
    """A modal, shown to whoever's click opened it (Slack ties it to the trigger id)."""

    id: str
    user: str | None
    view: dict[str, Any]
    open: bool = True
    errors: dict[str, str] = field(default_factory=dict)


class LocalSlack(LocalDirectory):
    def __init__(self, *, token: str | None = None, message_limit: int | None = MESSAGE_LIMIT):
        super().__init__()
        self.token = token
        self.message_limit = message_limit
        """Messages kept (oldest dropped first); None keeps all (tests, benchmarks)."""
        """When set, calls without `Authorization: Bearer <token>` get `invalid_auth`."""
        self.messages: dict[str, Message] = {}
        self.ephemerals: list[dict[str, Any]] = []
        """Arguments of each chat.postEphemeral call."""
        self.responses: list[dict[str, Any]] = []
        """Bodies posted to a response_url."""
        self.views: list[dict[str, Any]] = []
        """Each opened view as sent, with its `id`."""
        self.opened: dict[str, OpenedView] = {}
        self.private_notes: list[Note] = []
        self.home_tabs: dict[str, dict[str, Any]] = {}
        """The Home tab each person sees, as last published (`views.publish`)."""
        self.triggers: dict[str, str] = {}
        """trigger id -> user, for triggers the console made (so a modal finds its person)."""
        self.refused: list[Refusal] = []
        self.marked: list[Refusal] = []
        """Calls Slack takes whose plain text would show Markdown marks as typed (kept, logged)."""
        """Calls real Slack would refuse (invalid blocks, too long), answered as Slack would."""
        self.version = 0
        self.closing = asyncio.Event()
        self._last_us = 0
        # An event per version, swapped on every change: no lock, so a waiter cancelled by a
        # timeout can never leave one held (asyncio.wait_for around a Condition can, on 3.11).
        self._changed = asyncio.Event()
        self.agents = AgentSurface(post=self._post_streamed, find=lambda ts: self.messages.get(ts))
        """Agent sessions and streamed messages."""

    # --- serving --------------------------------------------------------------------------------

    def routes(self, prefix: str = "/") -> list[web.RouteDef]:
        """`{prefix}api/{method}` (the Web API base URL is `{prefix}api/`) and response URLs."""
        return [
            web.post(f"{prefix}api/{{method}}", self.handle_api),
            web.get(f"{prefix}api/{{method}}", self.handle_api),  # slack_sdk GETs some reads
            web.post(f"{prefix}response/{{token}}", self.handle_response),
        ]

    async def handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await request_arguments(request)
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        refused = self.refusal(method, args)
        if refused is None and (judged := self.judge(method, args)) is not None:
            refused = web.json_response({"ok": False, "error": judged.error})
        if refused is not None:
            await self.notify()
            return refused
        body = self.answer(method, args)
        await self.notify()
        return web.json_response(body)

    def refusal(self, method: str, args: dict[str, Any]) -> web.Response | None:
        """An error to answer instead of doing the call; never, here (the tests' fake says when)."""
        return None

    def judge(self, method: str, args: dict[str, Any]) -> Refusal | None:
        """Why real Slack would refuse this, if it would: kept in `refused` and logged."""
        found = refusal(method, args)
        if found is not None:
            self.refused.append(found)
            log.warning("Slack would refuse this %s (%s): %s", method, found.error, found.detail)
        elif (marked := plain_text_marks(method, args)) is not None:
            self.marked.append(marked)
            log.warning("%s shows Markdown marks as typed: %s", method, marked.detail)
        return found

    async def handle_response(self, request: web.Request) -> web.Response:
        body = await request.json()
        if (judged := self.judge("response", body)) is not None:
            return web.Response(status=400, text=judged.error)
        self.responses.append(body)
        # `<user>~<note id>`: the response URL of a click on that note, which it may redraw.
        user, _, note_id = request.match_info["token"].partition("~")
        text, blocks = str(body.get("text", "")), _blocks(body)
        note = next((n for n in self.private_notes if n.id == note_id and n.user == user), None)
        if body.get("replace_original") and note is not None:
            note.text, note.blocks = text, list(blocks or [])
        else:
            self.add_private_note(user, None, None, text, blocks)
        await self.notify()
        return web.Response(text="ok")

    # --- the Web API ----------------------------------------------------------------------------

    def answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "user_id": BOT_USER,
                "bot_id": "B0001",
                "team_id": TEAM,
                "user": "countersign",
                "team": "Console",
                "url": "https://console.localhost/",
                **({"enterprise_id": self.enterprise} if self.enterprise else {}),
                "is_enterprise_install": False,
            }
        handler = {
            "chat.postMessage": self._post,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "chat.postEphemeral": self._ephemeral,
            "views.open": self._open_view,
            "views.publish": self._publish,
        }.get(method)
        if handler is not None:
            return handler(args)
        if method in AGENT_METHODS:
            return self.agents.answer(method, args)
        if method == "conversations.open":
            users = str(args.get("users", ""))
            if not users or "," in users:
                return {"ok": False, "error": "invalid_arguments"}
            return {"ok": True, "channel": {"id": f"D{users}"}}
        return self.directory_answer(method, args)

    def _open_view(self, args: dict[str, Any]) -> dict[str, Any]:
        view = args.get("view")
        view = json.loads(view) if isinstance(view, str) else dict(view or {})
        view_id = f"V{len(self.views) + 1:04d}"
        view["id"] = view_id
        self.views.append(view)
        user = self.triggers.pop(str(args.get("trigger_id")), None)
        self.opened[view_id] = OpenedView(view_id, user, view)
        return {"ok": True, "view": {"id": view_id}}

    def _ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        self.ephemerals.append(args)
        self.add_private_note(
            str(args.get("user")),
            args.get("channel"),
            args.get("thread_ts"),
            _text(args),
            _blocks(args),
        )
        return {"ok": True, "message_ts": f"{time.time():.6f}"}

    def _publish(self, args: dict[str, Any]) -> dict[str, Any]:
        view = args.get("view")
        view = json.loads(view) if isinstance(view, str) else dict(view or {})
        if view.get("type") != "home":
            return {"ok": False, "error": "invalid_arguments"}
        user = str(args.get("user_id"))
        view["id"] = f"VHOME{user}"
        self.home_tabs[user] = view
        return {"ok": True, "view": {"id": view["id"], "type": "home"}}

    def _next_ts(self) -> str:
        """Like Slack's: the posting time, unique within the channel.

        Counted in whole microseconds: a float of today's epoch cannot hold one more microsecond
        reliably, and two messages sharing a ts would overwrite each other.
        """
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        seconds, micros = divmod(self._last_us, 1_000_000)
        return f"{seconds}.{micros:06d}"

    def _post(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = self._next_ts()
        channel = str(args["channel"])
        message = Message(channel, ts, _text(args), _blocks(args), args.get("thread_ts"))
        self.messages[ts] = message
        while self.message_limit is not None and len(self.messages) > self.message_limit:
            self.messages.pop(next(iter(self.messages)))
        return {"ok": True, "channel": channel, "ts": ts}

    def _post_streamed(self, channel: str, thread_ts: str, recipient: str | None) -> Message:
        ts = self._post({"channel": channel, "thread_ts": thread_ts})["ts"]
        message = self.messages[ts]
        message.recipient = recipient
        return message

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.messages.get(str(args.get("ts")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message.text = str(args.get("text", message.text))
        if "blocks" in args:
            message.blocks = _blocks(args)
        message.updates += 1
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _delete(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.messages.get(str(args.get("ts")))
        if message is None or message.channel != args.get("channel"):
            return {"ok": False, "error": "message_not_found"}
        del self.messages[message.ts]
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    # --- what the console shows -----------------------------------------------------------------

    def add_person_message(self, user: str, channel: str, thread_ts: str | None, text: str) -> str:
        """A person's message (a reply in a thread, or one to the app in its Messages tab), as
        Slack shows it before telling the app; its ts."""
        ts = self._next_ts()
        self.messages[ts] = Message(channel, ts, text, [], thread_ts, user=user)
        return ts

    def add_private_note(
        self,
        user: str,
        channel: str | None,
        thread_ts: str | None,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
    ) -> None:
        self.private_notes.append(Note(user, channel, thread_ts, text, blocks=list(blocks or [])))
        if self.message_limit is not None:
            del self.private_notes[: -self.message_limit]

    def close_view(self, view_id: str, errors: dict[str, str] | None = None) -> None:
        """After a submission: closed, or kept open showing Slack's per-field errors."""
        opened = self.opened.get(view_id)
        if opened is not None:
            opened.open = bool(errors)
            opened.errors = dict(errors or {})

    def restore(self, messages: list[Message], notes: list[Note]) -> None:
        """Take back a channel saved earlier (`bot.console.channel_store`); new messages get
        later timestamps than any restored one."""
        self.messages = {m.ts: m for m in messages}
        self.private_notes = list(notes)
        for ts in self.messages:
            seconds, _, micros = ts.partition(".")
            self._last_us = max(self._last_us, int(seconds) * 1_000_000 + int(micros or 0))

    def snapshot(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "messages": [asdict(m) for m in self.messages.values()],
            "notes": [asdict(n) for n in self.private_notes],
            "views": [asdict(v) for v in self.opened.values() if v.open],
            "home": self.home_tabs,
            "sessions": {
                s.thread_ts: {"status": s.status, "title": s.title}
                for s in self.agents.sessions.values()
                if s.thread_ts
            },
            "prompts": self.agents.prompts,
            "refused": [asdict(r) for r in self.refused[-REFUSALS_SHOWN:]],
            "refusals": len(self.refused),
        }

    async def notify(self) -> None:
        self.version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_for_change(self, version: int) -> None:
        """Return once something changed after `version` (callers bound the wait)."""
        while self.version <= version:
            await self._changed.wait()


def _text(args: dict[str, Any]) -> str:
    return str(args.get("text", ""))


def _blocks(args: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = args.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


async def request_arguments(request: web.Request) -> dict[str, Any]:
    """The call's arguments: slack_sdk sends some in the query string (`params`), even on POST."""
    query: dict[str, Any] = dict(request.query)
    if request.method == "GET":
        return query
    if request.content_type == "application/json":
        data = await request.json()
        return {**query, **dict(data)}
    form = await request.post()
    return {**query, **{key: value for key, value in form.items() if isinstance(value, str)}}
