"""The console's pages on the web process: only mounted when `CONSOLE=true`.

- `GET /console`: the page (plain HTML, JS and CSS from `static/`, no build step).
- `GET /console/stream`: server-sent events, one JSON snapshot of the channel per change.
- `POST /console/intents`: what the person did, played into `/slack/events` signed.
- `/console/api/*`, `/console/response/*`: the stand-in Slack that both processes call.

The console has no login: it is for one person's machine, so the web process binds to
127.0.0.1 when it is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from aiohttp import web
from pydantic import ValidationError

from bot.console.channel_store import ChannelStore
from bot.console.intents import (
    COMMAND_TEXT_LIMIT,
    INTENT,
    IntentRefused,
    IntentSender,
    Person,
)
from bot.console.local_slack import LocalSlack
from bot.settings import CONSOLE_PREFIX, Settings
from runtime.keys import Keys

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
KEEPALIVE_SECONDS = 15.0
PEOPLE = (
    Person("UALICE", "alice"),
    Person("UBOB", "bob"),
    Person("UCAROL", "carol"),
)
CHANNEL, CHANNEL_NAME = "CDEMO", "demo"

LOCAL_SLACK: web.AppKey[LocalSlack] = web.AppKey("local_slack", LocalSlack)
SENDER: web.AppKey[IntentSender] = web.AppKey("intent_sender", IntentSender)
CONFIG: web.AppKey[dict[str, Any]] = web.AppKey("console_config", dict)


def add_console(
    app: web.Application,
    settings: Settings,
    *,
    session: aiohttp.ClientSession,
    redis: aioredis.Redis,
    agent_names: list[str],
    scripted_model: bool,
) -> LocalSlack:
    """Mount the console and its stand-in Slack on `app`; return the stand-in. Its channel is
    kept in Redis (`bot.console.channel_store`), so a restart shows what still waits."""
    slack = LocalSlack(token=settings.slack_bot_token.get_secret_value())
    store = ChannelStore(redis=redis, key=Keys(settings.redis_key_prefix).console, slack=slack)
    slack.users.update({person.id: person.name for person in PEOPLE})
    app[LOCAL_SLACK] = slack
    app[SENDER] = IntentSender(
        slack=slack,
        session=session,
        signing_secret=settings.slack_signing_secret.get_secret_value(),
        channel=CHANNEL,
        channel_name=CHANNEL_NAME,
        people={person.id: person for person in PEOPLE},
    )
    app[CONFIG] = {
        "people": [{"id": p.id, "name": p.name} for p in PEOPLE],
        "channel": {"id": CHANNEL, "name": CHANNEL_NAME},
        "agents": agent_names,
        "model": "scripted" if scripted_model else "openai",
        "command_limit": COMMAND_TEXT_LIMIT,
    }
    app.router.add_routes(slack.routes(CONSOLE_PREFIX))
    app.router.add_get("/console", page)
    app.router.add_get("/console/stream", stream)
    app.router.add_post("/console/intents", intents)
    app.router.add_static("/console/static/", STATIC)

    async def keep_channel(_: web.Application) -> AsyncIterator[None]:
        restored = await store.restore()
        if restored:
            log.info("console: %d message(s) of the channel restored", restored)
        saver = asyncio.get_running_loop().create_task(store.keep_saved(), name="console-save")
        yield
        await slack.notify()  # closing is set by now: the saver saves once more and ends
        await asyncio.wait_for(saver, timeout=5)

    async def close_streams(_: web.Application) -> None:
        # Open event streams would hold graceful shutdown for its whole timeout.
        slack.closing.set()
        await slack.notify()

    app.cleanup_ctx.append(keep_channel)
    app.on_shutdown.append(close_streams)
    return slack


async def page(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


async def stream(request: web.Request) -> web.StreamResponse:
    slack = request.app[LOCAL_SLACK]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    sent = -1
    try:
        while not slack.closing.is_set():
            if slack.version != sent:
                sent = slack.version
                snapshot = {**slack.snapshot(), "config": request.app[CONFIG]}
                await response.write(f"data: {json.dumps(snapshot)}\n\n".encode())
            else:
                await response.write(b": keepalive\n\n")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(KEEPALIVE_SECONDS):
                    await slack.wait_for_change(sent)
    except (ConnectionResetError, aiohttp.ClientConnectionResetError):
        pass  # the page was closed
    return response


async def intents(request: web.Request) -> web.Response:
    try:
        intent = INTENT.validate_python(await request.json())
    except (ValidationError, ValueError):
        return web.json_response({"error": "not an intent the console knows"}, status=400)
    socket = request.transport.get_extra_info("sockname") if request.transport else None
    if not socket:
        return web.json_response({"error": "no local address"}, status=500)
    try:
        result = await request.app[SENDER].send(intent, f"http://127.0.0.1:{socket[1]}")
    except IntentRefused as error:
        return web.json_response({"error": str(error)}, status=404)
    except (aiohttp.ClientError, TimeoutError):
        log.warning("console: /slack/events did not answer", exc_info=True)
        return web.json_response({"error": "the bot did not answer"}, status=502)
    return web.json_response(result)
