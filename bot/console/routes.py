"""The console's pages on the web process: only mounted when `CONSOLE=true`.

- `GET /console`: the page (plain HTML, JS and CSS from `static/`, no build step).
- `GET /console/stream`: server-sent events, one JSON snapshot of the channel per change.
- `POST /console/intents`: what the person did, played into `/slack/events` signed.
- `/console/api/*`, `/console/response/*`: the stand-in Slack that both processes call.

The console has no login: it is for one person's machine, so the web process binds to
127.0.0.1 when it is on. Binding is not enough against a web page in that person's browser: a
page of another site may post to 127.0.0.1 (a form or `fetch` needs no CORS to send), and a
name of its own that it re-points at 127.0.0.1 (DNS rebinding) may read the answers too. So
everything under /console answers only requests for a loopback host name, and an intent
only as JSON from the console's own origin (no cross-site form or simple request can send both).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
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
)
from bot.console.local_slack import LocalSlack
from bot.console.workspace import CHANNEL, CHANNEL_NAME, PEOPLE
from bot.settings import CONSOLE_PREFIX, Settings
from runtime.db import Keys

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
KEEPALIVE_SECONDS = 15.0
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
NOT_LOCAL = "The console answers only on localhost."
NOT_FROM_CONSOLE = "Intents are taken only as JSON from the console's own page."

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
    store = ChannelStore(redis=redis, key=Keys.of(settings).console, slack=slack)
    slack.users.update({person.id: person.name for person in PEOPLE})
    slack.channels[CHANNEL] = CHANNEL_NAME
    # Everyone is in #demo: a call anyone there may decide waits on each Home tab.
    slack.channel_members[CHANNEL] = [person.id for person in PEOPLE]
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
        "channels": slack.channels,
        "groups": {group: about["handle"] for group, about in slack.groups.items()},
        "agents": agent_names,
        "model": "scripted" if scripted_model else "openai",
        "command_limit": COMMAND_TEXT_LIMIT,
    }
    app.router.add_routes(slack.routes(CONSOLE_PREFIX))
    app.router.add_get("/console", page)
    app.router.add_get("/console/stream", stream)
    app.router.add_post("/console/intents", intents)
    app.router.add_static("/console/static/", STATIC)
    app.middlewares.append(local_only)

    async def keep_channel(_: web.Application) -> AsyncIterator[None]:
        await name_the_workspace(redis, Keys.of(settings))
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


async def name_the_workspace(redis: aioredis.Redis, keys: Keys) -> None:
    """Cache the console's people and channel by name, as the directory caches what Slack says
    (`bot.slack.directory`), and for good: they never change, and the command line, which reads
    only that cache (`runtime.review.names`), then says `@bob` and `#demo` however long ago
    anyone looked them up."""
    async with redis.pipeline(transaction=False) as pipe:
        for person in PEOPLE:
            pipe.set(keys.slack.display_name(person.id), person.name)
        pipe.set(keys.slack.display_name(CHANNEL), CHANNEL_NAME)
        await pipe.execute()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def local_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Everything under /console (pages, stream, intents, the stand-in Slack) stays local."""
    console = request.path == "/console" or request.path.startswith(CONSOLE_PREFIX)
    if console and not is_loopback_host(request.headers.get("Host"), _local_port(request)):
        return web.json_response({"error": NOT_LOCAL}, status=403)
    return await handler(request)


def is_loopback_host(host: str | None, port: int | None) -> bool:
    """A Host header naming this machine's loopback, with the port the console listens on."""
    if host is None or port is None:
        return False
    allowed = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == 80:
        allowed.update(LOOPBACK_NAMES)
    return host.lower() in allowed


def _local_port(request: web.Request) -> int | None:
    socket = request.transport.get_extra_info("sockname") if request.transport else None
    return int(socket[1]) if socket else None


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
    # The Host was checked by local_only; the page's own fetch sends both of these, while a
    # form or a "simple" cross-site request can send neither JSON nor our origin.
    same_origin = request.headers.get("Origin") == f"http://{request.headers.get('Host')}"
    if request.content_type != "application/json" or not same_origin:
        return web.json_response({"error": NOT_FROM_CONSOLE}, status=403)
    try:
        intent = INTENT.validate_python(await request.json())
    except (ValidationError, ValueError):
        return web.json_response({"error": "not an intent the console knows"}, status=400)
    port = _local_port(request)
    if port is None:
        return web.json_response({"error": "no local address"}, status=500)
    try:
        result = await request.app[SENDER].send(intent, f"http://127.0.0.1:{port}")
    except IntentRefused as error:
        return web.json_response({"error": str(error)}, status=404)
    except (aiohttp.ClientError, TimeoutError):
        log.warning("console: /slack/events did not answer", exc_info=True)
        return web.json_response({"error": "the bot did not answer"}, status=502)
    return web.json_response(result)
