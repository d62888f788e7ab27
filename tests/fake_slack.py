"""A fake Slack Web API on 127.0.0.1: records every call and keeps the channel's messages.

The bot's real `slack_sdk` client talks to it over HTTP; tests read what a person would see.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT_USER = "UBOT0001"
STATUS_PREFIXES = (
    ":hourglass_flowing_sand:",
    ":raised_hand: Waiting",
    ":white_check_mark: Done",
    ":x: Stopped",
)
NOTE_PREFIXES = (":alarm_clock:", ":warning:")
"""Reminders and notes in a thread: neither status nor answer."""


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    at: float


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    updates: int = 0

    def actions(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b["elements"]]

    def action_ids(self) -> list[str]:
        return [e["action_id"] for e in self.actions()]

    def all_text(self) -> str:
        """Everything a reader sees on the message, flattened."""
        parts = [self.text]
        for block in self.blocks:
            parts.append(json.dumps(block, ensure_ascii=False))
        return "\n".join(parts)


@dataclass
class Failure:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    when: Callable[[dict[str, Any]], bool] = lambda args: True


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: dict[str, Message] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self._failures: dict[str, list[Failure]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        """User groups by id: {"handle": ..., "users": [...]} (usergroups.* methods)."""
        self.users: dict[str, str] = {}
        """Display names by user id (users.info)."""
        self._ts = itertools.count(1)
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.url = ""

    # --- server -------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)  # slack_sdk GETs some read methods
        app.router.add_post("/response/{token}", self._response_url)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def response_url(self, token: str = "resp") -> str:
        return f"{self.url}/response/{token}"

    # --- test controls -------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int,
        body: dict[str, Any],
        when: Callable[[dict[str, Any]], bool] = lambda args: True,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Make the next call of `method` (whose arguments match `when`) fail this way.

        Queue several for several calls.
        """
        self._failures.setdefault(method, []).append(Failure(status, body, headers or {}, when))

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition"
    ) -> Any:
        """Wait until `predicate()` is truthy; return its value."""
        deadline = time.monotonic() + timeout
        async with self._changed:
            while True:
                value = predicate()
                if value:
                    return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}; calls: {self.summary()}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout=remaining)

    def summary(self) -> str:
        return ", ".join(c.method for c in self.calls[-40:])

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        return [
            m for m in self.messages.values() if m.channel == channel and m.thread_ts == thread_ts
        ]

    def cards(self) -> list[Message]:
        """Approval cards, in the order they were posted."""
        return [
            m
            for m in self.messages.values()
            if any(b.get("block_id") == "approval" for b in m.blocks)
            or "wants to run" in m.all_text()
        ]

    def roots(self) -> list[Message]:
        return [m for m in self.messages.values() if m.thread_ts is None]

    def final_answers(self, thread_ts: str) -> list[Message]:
        """Thread replies that are not cards, the status message, reminders or notes."""
        return [
            m
            for m in self.messages.values()
            if m.thread_ts == thread_ts
            and not m.blocks
            and not m.text.startswith(STATUS_PREFIXES + NOTE_PREFIXES)
        ]

    def notes(self, thread_ts: str) -> list[Message]:
        return [
            m
            for m in self.messages.values()
            if m.thread_ts == thread_ts and m.text.startswith(NOTE_PREFIXES)
        ]

    # --- handlers ---------------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _arguments(request)
        self.calls.append(Call(method, args, time.time()))
        failures = self._failures.get(method)
        if failures and failures[0].when(args):
            failure = failures.pop(0)
            await self._notify()
            return web.json_response(failure.body, status=failure.status, headers=failure.headers)
        body = self._answer(method, args)
        await self._notify()
        return web.json_response(body)

    def _answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        handlers = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._post_ephemeral,
            "views.open": self._open_view,
            "usergroups.users.list": self._group_members,
            "usergroups.list": self._groups,
            "users.info": self._user_info,
        }
        handler = handlers.get(method)
        return handler(args) if handler else {"ok": False, "error": "unknown_method"}

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "user_id": BOT_USER,
            "bot_id": "B0001",
            "team_id": "T0001",
            "user": "countersign",
            "team": "Test",
            "url": "https://test.slack.com/",
        }

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = f"{1_700_000_000 + next(self._ts)}.000100"
        channel = str(args["channel"])
        text = str(args.get("text", ""))
        self.messages[ts] = Message(channel, ts, text, _blocks(args), args.get("thread_ts"))
        return {"ok": True, "channel": channel, "ts": ts}

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.messages.get(str(args.get("ts")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message.text = str(args.get("text", message.text))
        if "blocks" in args:
            message.blocks = _blocks(args)
        message.updates += 1
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        self.ephemerals.append(args)
        return {"ok": True, "message_ts": f"{time.time():.6f}"}

    def _open_view(self, args: dict[str, Any]) -> dict[str, Any]:
        view = args["view"]
        self.views.append(json.loads(view) if isinstance(view, str) else view)
        return {"ok": True, "view": {"id": f"V{len(self.views)}"}}

    def _group_members(self, args: dict[str, Any]) -> dict[str, Any]:
        group = self.groups.get(str(args.get("usergroup")))
        if group is None:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(group["users"])}

    def _groups(self, args: dict[str, Any]) -> dict[str, Any]:
        groups = [
            {"id": gid, "handle": g["handle"], "name": g["handle"]}
            for gid, g in self.groups.items()
        ]
        return {"ok": True, "usergroups": groups}

    def _user_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user_id = str(args.get("user"))
        name = self.users.get(user_id)
        if name is None:
            return {"ok": False, "error": "user_not_found"}
        profile = {"display_name": name, "real_name": name}
        return {"ok": True, "user": {"id": user_id, "name": name.lower(), "profile": profile}}

    async def _response_url(self, request: web.Request) -> web.Response:
        self.responses.append(await request.json())
        await self._notify()
        return web.Response(text="ok")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()


def _blocks(args: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = args.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


async def _arguments(request: web.Request) -> dict[str, Any]:
    if request.method == "GET":
        return dict(request.query)
    if request.content_type == "application/json":
        data = await request.json()
        return dict(data)
    form = await request.post()
    return {key: value for key, value in form.items() if isinstance(value, str)}
