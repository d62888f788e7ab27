"""A fake Slack Web API on 127.0.0.1: the console's stand-in Slack, plus what tests need.

The bot's real `slack_sdk` client talks to it over HTTP; tests read what a person would see,
make calls fail on purpose, and wait for things to appear.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.console.local_directory import BOT_USER
from bot.console.local_slack import LocalSlack, Message, request_arguments
from tests.support.local_server import serve

__all__ = ["BOT_USER", "Call", "FakeSlack", "Message"]

STATUS_PREFIXES = (
    ":hourglass_flowing_sand:",
    ":raised_hand: Waiting",
    ":white_check_mark: Done",
    ":x: Failed",
    ":no_entry_sign: Nothing ran",
)
NOTE_PREFIXES = (
    ":alarm_clock:",
    ":warning:",
    ":no_entry: Stopped by",
    ":rotating_light:",
    ":eyes:",  # an edited call's preview, just before it runs
)
"""Reminders, escalations and notes in a thread: neither status nor answer."""


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    at: float


@dataclass
class Failure:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    when: Callable[[dict[str, Any]], bool] = lambda args: True


AGENT_ERRORS = (
    "not_allowed",
    "method_not_supported",
    "missing_scope",
    "not_enabled",
    "ratelimited",
    "internal_error",
)
"""What Slack answers a workspace or an app without agent sessions or streams, or a call it
could not serve (past its rate limit, an error of its own): `refuse` makes the fake answer each."""
ONE_CALL_ERRORS = ("ratelimited", "internal_error")
"""Of `AGENT_ERRORS`, the answers about one call rather than about what the app may do."""
NEEDED_SCOPES = {
    "agents.sessions.setStatus": "assistant:write",
    "agents.sessions.rename": "assistant:write",
    "assistant.threads.setSuggestedPrompts": "assistant:write",
}

TOKEN_ERRORS = ("invalid_auth", "account_inactive", "token_revoked")
"""What Slack answers, to any method, for a token it does not know, of a deactivated bot or
workspace, or revoked (an uninstall): HTTP 200 with `ok: false`."""


class FakeSlack(LocalSlack):
    def __init__(self, *, token: str | None = None) -> None:
        """`token`: the one bot token it knows (another gets `invalid_auth`, as Slack answers);
        None takes any."""
        super().__init__(token=token, message_limit=None)
        self.token_error: str | None = None
        """While set (`account_inactive`, `token_revoked`), every Web API call is answered
        with it, as Slack answers once a token is deactivated or revoked."""
        self.calls: list[Call] = []
        self._failures: dict[str, list[Failure]] = {}
        self._refusing: dict[str, str] = {}
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.extra_routes: list[web.RouteDef] = []
        """Routes a test adds before `start()` (e.g. Socket Mode's WebSocket)."""
        self._held: dict[str, asyncio.Event] = {}
        self.holding: list[str] = []
        """Bodies of the calls being held unanswered right now (see `hold`)."""
        self._slow: dict[str, tuple[float, asyncio.Event, Callable[[dict[str, Any]], bool]]] = {}
        self.waiting: dict[str, int] = {}
        """Answers being held by `slow_down`, by method."""
        self.response_peers: list[object] = []
        """The client address (host, port) of each `response_url` post: one connection per
        address, so as many addresses as posts means a connection of its own for each."""

    # --- server -------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_routes(self.routes("/"))
        app.router.add_routes(self.extra_routes)
        self._runner, self.url = await serve(app)

    async def stop(self) -> None:
        for release in self._held.values():
            release.set()
        for method in list(self._slow):
            self.speed_up(method)
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

    def refuse(self, methods: tuple[str, ...] | str, error: str) -> None:
        """Answer every call of `methods` with `error` from now on, as Slack answers it:
        `missing_scope` names the scope needed, `ratelimited` is a 429 with Retry-After (which
        the client waits out and tries again, until it gives up)."""
        for method in (methods,) if isinstance(methods, str) else methods:
            self._refusing[method] = error

    def answer_again(self, method: str) -> None:
        """Stop refusing `method` (see `refuse`)."""
        self._refusing.pop(method, None)

    def assert_nothing_refused(self) -> None:
        """Fail the test if the bot sent anything real Slack would refuse (see `refused`), or
        plain text with Markdown marks in it (`marked`): every test walks every payload the bot
        built. A test that sends such a thing on purpose reads and clears them itself."""
        if self.refused:
            found = "; ".join(f"{r.method}: {r.error}: {r.detail}" for r in self.refused)
            raise AssertionError(f"Slack would have refused what the bot sent: {found}")
        if self.marked:
            found = "; ".join(f"{r.method}: {r.detail}" for r in self.marked)
            raise AssertionError(f"Markdown marks in plain text, shown as typed: {found}")

    def hold(self, method: str) -> None:
        """Leave calls of `method` unanswered (a Slack that hangs) until the fake stops."""
        self._held.setdefault(method, asyncio.Event())

    def slow_down(
        self,
        method: str,
        seconds: float,
        when: Callable[[dict[str, Any]], bool] = lambda args: True,
    ) -> None:
        """Hold each answer to `method` (whose arguments match `when`) this long (a Slack under
        load), until `speed_up(method)`.

        The call is made (and counted in `calls`) on arrival; only the answer waits, so it tells
        what was true when the call arrived.
        """
        self._slow[method] = (seconds, asyncio.Event(), when)

    def speed_up(self, method: str) -> None:
        """Send held answers to `method` now, and later ones at once."""
        slow = self._slow.pop(method, None)
        if slow is not None:
            slow[1].set()

    async def handle_response(self, request: web.Request) -> web.Response:
        self.response_peers.append(
            request.transport.get_extra_info("peername") if request.transport else None
        )
        return await super().handle_response(request)

    async def handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        refused = self.token_error
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            refused = "invalid_auth"
        if refused is not None:
            self.calls.append(Call(method, await request_arguments(request), time.time()))
            await self.notify()
            return web.json_response({"ok": False, "error": refused})
        release = self._held.get(method)
        if release is not None:
            # Read now (and kept for later): the caller may have given up by then.
            body = (await request.read()).decode()
            self.holding.append(body)
            await self.notify()
            try:
                await release.wait()
            finally:
                self.holding.remove(body)
        slow = self._slow.get(method)
        if slow is not None and not slow[2](await request_arguments(request)):
            slow = None
        response = await super().handle_api(request)
        if slow is not None:
            seconds, released, _when = slow
            self.waiting[method] = self.waiting.get(method, 0) + 1
            await self.notify()
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(released.wait(), seconds)
            finally:
                self.waiting[method] -= 1
        return response

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition"
    ) -> Any:
        """Wait until `predicate()` is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.version
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for {what}; calls: {self.summary()}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wait_for_change(seen), remaining)

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
            if any(b.get("block_id") in ("approval", "decision") for b in m.blocks)
            or "wants to run" in m.all_text()
        ]

    def status_messages(self, thread_ts: str) -> list[Message]:
        """The run's status message (one, edited in place): in the thread, with blocks, no card;
        with streaming, each stretch's streamed message."""
        cards = {m.ts for m in self.cards()}
        return [
            m
            for m in self.messages.values()
            if m.thread_ts == thread_ts and (m.blocks or m.streamed) and m.ts not in cards
        ]

    def roots(self) -> list[Message]:
        """Messages that start a thread (not copies of cards sent elsewhere, nor of an MCP
        server's questions)."""
        cards = {id(card) for card in self.cards()}
        return [
            m
            for m in self.messages.values()
            if m.thread_ts is None and id(m) not in cards and not m.is_question()
        ]

    def questions(self) -> list[Message]:
        """Messages that show an MCP server's question (its thread's, and copies)."""
        return [m for m in self.messages.values() if m.is_question()]

    def copies(self) -> list[Message]:
        """Copies of cards outside their thread (direct messages, other channels)."""
        return [m for m in self.cards() if m.thread_ts is None]

    def final_answers(self, thread_ts: str) -> list[Message]:
        """Thread replies that are not cards, the status message, reminders or notes."""
        return [
            m
            for m in self.messages.values()
            if m.thread_ts == thread_ts
            and not m.blocks
            and not m.streamed
            and not m.text.startswith(STATUS_PREFIXES + NOTE_PREFIXES)
        ]

    def notes(self, thread_ts: str) -> list[Message]:
        return [
            m
            for m in self.messages.values()
            if m.thread_ts == thread_ts and not m.blocks and m.text.startswith(NOTE_PREFIXES)
        ]

    # --- failures ---------------------------------------------------------------------------------

    def refusal(self, method: str, args: dict[str, Any]) -> web.Response | None:
        self.calls.append(Call(method, args, time.time()))
        refusing = self._refusing.get(method)
        if refusing is not None:
            body: dict[str, Any] = {"ok": False, "error": refusing}
            if refusing == "missing_scope":
                needed = NEEDED_SCOPES.get(method, "chat:write")
                body |= {"needed": needed, "provided": "chat:write"}
            if refusing == "ratelimited":
                return web.json_response(body, status=429, headers={"Retry-After": "0"})
            return web.json_response(body)
        failures = self._failures.get(method)
        if failures and failures[0].when(args):
            failure = failures.pop(0)
            return web.json_response(failure.body, status=failure.status, headers=failure.headers)
        return None
