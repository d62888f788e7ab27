"""Socket Mode: with `SLACK_APP_TOKEN` set, Slack's requests arrive over a WebSocket.

The web process opens the connection itself (slack-bolt's aiohttp handler), so a development
machine needs no public URL. The same Bolt app answers, so the listeners, their checks and
their acknowledgements are those of HTTP mode; `/healthz` is still served over HTTP.

The process serves `/healthz` and `/readyz` at once and connects in the background: `/readyz`
says ready only once connected. While Slack does not answer, each attempt is one line and the
next waits twice as long (to `MAX_RETRY_SECONDS`); when Slack refuses the app token, one line
names `SLACK_APP_TOKEN` and the fix, and it is not asked again. The first URL is asked here
(`apps.connections.open`): slack_sdk would retry a refused token every few seconds, each time
with a traceback. Once connected, slack_sdk keeps the connection and reconnects on its own.

Each envelope is checked as an HTTP request's body is (`bot.slack.bodies`) before slack_sdk
parses it: one too long or nested too deep, or whose payload is not something Slack sends, is
acknowledged (so Slack does not send it again), logged in one line and dropped, where slack_sdk
would log a traceback, never acknowledge it, and have Slack retry it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Any

from aiohttp import ClientError, web
from slack_bolt.adapter.socket_mode.async_base_handler import AsyncBaseSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.slack.bodies import RefusedBody, malformed, read_json
from bot.slack.bot_token import REFUSED
from runtime.db import FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS
from runtime.process import Backoff, Shutdown

log = logging.getLogger(__name__)

OPEN_TIMEOUT_SECONDS = 10.0
_ENVELOPE_ID = re.compile(r'"envelope_id"\s*:\s*"([A-Za-z0-9_.:-]{1,128})"')
"""An envelope's id, found without parsing it (to acknowledge one that cannot be parsed)."""


class SocketState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    REFUSED = "refused"
    """Slack refused `SLACK_APP_TOKEN`: nothing arrives until it is fixed and the web restarted."""


class CheckedSocketClient(SocketModeClient):
    """slack_sdk's Socket Mode client, reading each envelope within bounds first."""

    async def enqueue_message(self, message: str) -> None:
        if message.startswith("{"):
            try:
                refusal = _refusal(read_json(message))
            except RefusedBody as refused:
                refusal = str(refused)
            if refusal is not None:
                found = _ENVELOPE_ID.search(message)
                log.warning(
                    "Socket Mode: envelope %s refused: %s",
                    found.group(1) if found else "(no id)",
                    refusal,
                )
                if found is not None:
                    await self.send_socket_mode_response(
                        SocketModeResponse(envelope_id=found.group(1))
                    )
                return
        await super().enqueue_message(message)


def _refusal(envelope: Any) -> str | None:
    """Why an envelope Slack sent is not one to hand to Bolt (None: hand it over)."""
    if not isinstance(envelope, dict):
        return "not an object"
    if "envelope_id" not in envelope:
        return None  # hello, disconnect: slack_sdk's own
    return malformed(envelope.get("payload"))


class BoltSocketHandler(AsyncBaseSocketModeHandler):
    """slack-bolt's `AsyncSocketModeHandler`, on the checked client."""

    app: AsyncApp

    def __init__(self, bolt: AsyncApp, app_token: str) -> None:
        self.app = bolt
        self.app_token = app_token
        self.client = CheckedSocketClient(
            app_token=app_token, logger=bolt.logger, web_client=bolt.client
        )
        self.client.socket_mode_request_listeners.append(self.handle)

    async def handle(self, client: AsyncBaseSocketModeClient, req: SocketModeRequest) -> None:
        start = time.time()
        await send_async_response(client, req, await run_async_bolt_app(self.app, req), start)


class SocketModeConnection:
    def __init__(
        self, bolt: AsyncApp, app_token: str, *, fix: str, first_delay: float = FIRST_RETRY_SECONDS
    ) -> None:
        self._bolt = bolt
        self._app_token = app_token
        self._fix = fix
        self._first_delay = first_delay
        self._handler: BoltSocketHandler | None = None
        self._refused = False

    async def state(self) -> SocketState:
        """For `/readyz`."""
        if self._refused:
            return SocketState.REFUSED
        if self._handler is not None and await self._handler.client.is_connected():
            return SocketState.CONNECTED
        return SocketState.CONNECTING

    async def run(self, stopping: Shutdown) -> None:
        """Connect, asking again with a backoff while Slack does not answer, until `stopping`."""
        # Built here: its HTTP session must belong to the running loop.
        handler = BoltSocketHandler(self._bolt, self._app_token)
        self._handler = handler
        backoff = Backoff(self._first_delay, MAX_RETRY_SECONDS)
        while not stopping.is_set():
            url = await self._open(handler, backoff.delay, stopping)
            if url is not None:
                handler.client.wss_uri = url
                await stopping.unless_stopped(handler.connect_async())  # type: ignore[no-untyped-call]
                if not stopping.is_set():
                    log.info("Socket Mode: connected; Slack's requests arrive over the WebSocket")
                return
            if self._refused or await stopping.sleep(backoff.failed()):
                return

    async def _open(
        self, handler: BoltSocketHandler, delay: float, stopping: Shutdown
    ) -> str | None:
        """The WebSocket's URL, or None (said in one line, unless stopping) if Slack gives
        none now."""
        opening = handler.client.web_client.apps_connections_open(app_token=self._app_token)
        try:
            async with asyncio.timeout(OPEN_TIMEOUT_SECONDS):
                response = await stopping.unless_stopped(opening)
            if response is None:
                return None
        except SlackApiError as error:
            reason = str(error.response.get("error"))
            if reason in REFUSED:
                self._refused = True
                log.error("Slack refuses SLACK_APP_TOKEN (%s). %s", reason, self._fix)
                return None
            log.warning("Socket Mode: Slack answers %s; retrying in %g s", reason, delay)
            return None
        except (ClientError, TimeoutError, OSError) as error:
            log.warning(
                "Socket Mode: cannot reach Slack (%s); retrying in %g s",
                type(error).__name__,
                delay,
            )
            return None
        url = response.get("url")
        if not isinstance(url, str):
            log.warning("Socket Mode: Slack gave no URL; retrying in %g s", delay)
            return None
        return url

    async def close(self) -> None:
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]


def add_socket_mode(
    app: web.Application, bolt: AsyncApp, app_token: str, *, fix: str
) -> SocketModeConnection:
    """Connect in the background once the web app serves; disconnect first thing on shutdown."""
    connection = SocketModeConnection(bolt, app_token, fix=fix)

    async def connected(_: web.Application) -> AsyncIterator[None]:
        stopping = Shutdown()
        task = asyncio.get_running_loop().create_task(connection.run(stopping), name="socket")
        yield
        stopping.set()
        await task

    async def close(_: web.Application) -> None:
        # No new requests from here on; the ones in flight finish before cleanup.
        await connection.close()

    app.cleanup_ctx.append(connected)
    app.on_shutdown.append(close)
    return connection
