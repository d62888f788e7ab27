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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from enum import StrEnum

from aiohttp import ClientError, web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

from bot.slack.bot_token import REFUSED
from runtime.db import FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS
from runtime.process import Backoff, Shutdown

log = logging.getLogger(__name__)

OPEN_TIMEOUT_SECONDS = 10.0


class SocketState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    REFUSED = "refused"
    """Slack refused `SLACK_APP_TOKEN`: nothing arrives until it is fixed and the web restarted."""


class SocketModeConnection:
    def __init__(
        self, bolt: AsyncApp, app_token: str, *, fix: str, first_delay: float = FIRST_RETRY_SECONDS
    ) -> None:
        self._bolt = bolt
        self._app_token = app_token
        self._fix = fix
        self._first_delay = first_delay
        self._handler: AsyncSocketModeHandler | None = None
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
        handler = AsyncSocketModeHandler(self._bolt, self._app_token)
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
        self, handler: AsyncSocketModeHandler, delay: float, stopping: Shutdown
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
