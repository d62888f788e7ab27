"""Socket Mode: with `SLACK_APP_TOKEN` set, Slack's requests arrive over a WebSocket.

The web process opens the connection itself (slack-bolt's aiohttp handler), so a development
machine needs no public URL. The same Bolt app answers, so the listeners, their checks and
their acknowledgements are those of HTTP mode; `/healthz` is still served over HTTP.
"""

from __future__ import annotations

import logging

from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp

log = logging.getLogger(__name__)

SOCKET_MODE: web.AppKey[AsyncSocketModeHandler] = web.AppKey("socket_mode", AsyncSocketModeHandler)


def add_socket_mode(app: web.Application, bolt: AsyncApp, app_token: str) -> None:
    """Connect when the web app starts; disconnect first thing on shutdown."""

    async def connect(app: web.Application) -> None:
        # Built here: its HTTP session must belong to the running loop.
        handler = AsyncSocketModeHandler(bolt, app_token)
        app[SOCKET_MODE] = handler
        await handler.connect_async()  # type: ignore[no-untyped-call]  # untyped in slack-bolt
        log.info("Socket Mode: connected; Slack's requests arrive over the WebSocket")

    async def close(app: web.Application) -> None:
        # No new requests from here on; the ones in flight finish before cleanup.
        handler = app.get(SOCKET_MODE)
        if handler is not None:
            await handler.close_async()  # type: ignore[no-untyped-call]

    app.on_startup.append(connect)
    app.on_shutdown.append(close)
