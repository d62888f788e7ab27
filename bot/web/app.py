"""The web process: Slack's requests in at /slack/events, a health check at /healthz.

With `SLACK_APP_TOKEN` set, Slack's requests come over Socket Mode instead (`bot.web.socket_mode`);
with `CONSOLE=true` it also serves the local console (`bot.console`), which is imported only
then: a production web process does not carry the console's code.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier

from bot.home.routes import run_home_watch
from bot.settings import Settings
from bot.slack.bodies import MAX_BODY_CHARS, RefusedBody, read_body
from bot.slack.in_flight import InFlight
from bot.web.bolt import WebSlack, build_bolt
from bot.web.operations import add_operations
from bot.web.socket_mode import add_socket_mode
from bot.wiring import blocking_reads_redis, home_tab_redis
from runtime.db import EvictionPolicyLog, Keys, wait_until_reachable
from runtime.failover import PrimaryWatch, watch_for
from runtime.models import uses_scripted_model
from runtime.policy import Policy
from runtime.process import Shutdown, ShutdownBudget, TaskSet

log = logging.getLogger(__name__)

BOLT: web.AppKey[AsyncApp] = web.AppKey("bolt", AsyncApp)
REDIS: web.AppKey[aioredis.Redis] = web.AppKey("redis", aioredis.Redis)
TASKS: web.AppKey[TaskSet] = web.AppKey("tasks", TaskSet)
VERIFIER: web.AppKey[SignatureVerifier] = web.AppKey("verifier", SignatureVerifier)
IN_FLIGHT: web.AppKey[InFlight] = web.AppKey("in_flight", InFlight)

# Heroku gives 30 s between SIGTERM and SIGKILL; SHUTDOWN_GRACE_SECONDS (25) is the whole stop.
# Requests in flight get a share (Slack's are acknowledged within 3 s, so they need little), the
# Slack updates they spawned get the rest, less a moment to close the sessions.
REQUESTS_SHARE = 0.4
REQUESTS_MAX_SECONDS = 10.0
CLOSING_SECONDS = 1.0


def requests_grace(settings: Settings) -> float:
    """How long requests in flight at SIGTERM may finish (aiohttp's `shutdown_timeout`)."""
    return min(REQUESTS_MAX_SECONDS, settings.shutdown_grace_seconds * REQUESTS_SHARE)


async def slack_events(request: web.Request) -> web.StreamResponse:
    # Bolt would trip over a body Slack never sends, even while building its request object, so
    # the signature and the body's size, depth and shape are checked first (`bot.slack.bodies`).
    try:
        raw = await request.text()
    except web.HTTPRequestEntityTooLarge:
        log.warning("request refused: larger than %d bytes", MAX_BODY_CHARS)
        return web.json_response({"ok": False, "error": "too_large"}, status=413)
    if _is_ssl_check(raw, request.content_type):
        # Slack checking the certificate (`ssl_check=1`) wants a 200, as Bolt answers it: before
        # the signature, and with nothing done.
        return web.Response(status=200)
    if not request.app[VERIFIER].is_valid_request(raw, dict(request.headers)):
        return web.json_response({"error": "invalid request"}, status=401)
    try:
        read_body(raw, request.content_type)
    except RefusedBody as refused:
        log.warning("signed request with a malformed body refused: %s", refused)
        return web.json_response({"ok": False, "error": "malformed_payload"}, status=400)
    with request.app[IN_FLIGHT].answering():
        response = await request.app[BOLT].async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)


def _is_ssl_check(raw: str, content_type: str) -> bool:
    return content_type == "application/x-www-form-urlencoded" and parse_qs(raw).get(
        "ssl_check"
    ) == ["1"]


async def healthz(request: web.Request) -> web.Response:
    try:
        await request.app[REDIS].ping()
    except RedisError:
        return web.json_response({"ok": False, "redis": "unreachable"}, status=503)
    return web.json_response({"ok": True})


async def create_web_app(
    settings: Settings, *, redis: aioredis.Redis, agent_names: list[str], policy: Policy
) -> web.Application:
    """The web process's composition root, built inside the running loop (the HTTP session
    needs one)."""
    app = web.Application(client_max_size=MAX_BODY_CHARS)
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))
    tasks = TaskSet("slack")
    reads = blocking_reads_redis(settings)
    home_redis = home_tab_redis(settings)
    shutdown = _shutdown_budget(app, settings)
    slack = build_bolt(
        settings,
        redis=redis,
        home_redis=home_redis,
        session=session,
        agent_names=agent_names,
        policy=policy,
        tasks=tasks,
    )
    _serve_slack(app, settings, slack, redis=redis, tasks=tasks)
    app.router.add_get("/healthz", healthz)
    run_home_watch(app, replace(slack.home_watch, reads=reads))
    eviction_log = _watch_redis(app, settings, redis)
    socket = None
    if settings.slack_app_token is not None and not settings.console:
        token = settings.slack_app_token.get_secret_value()
        socket = add_socket_mode(app, app[BOLT], token, fix=Settings.fix("SLACK_APP_TOKEN"))
    add_operations(
        app,
        redis=redis,
        keys=Keys.of(settings),
        eviction_log=eviction_log,
        socket=socket,
        # The console's Slack is this process, and its token its own.
        credentials=None if settings.console else slack.bot_token,
    )
    if settings.console:
        _add_console(app, settings, session=session, redis=redis, agent_names=agent_names)
    app.on_cleanup.append(
        _closing(
            tasks, shutdown, closing=(session.close, reads.aclose, home_redis.aclose, redis.aclose)
        )
    )
    return app


def _serve_slack(
    app: web.Application,
    settings: Settings,
    slack: WebSlack,
    *,
    redis: aioredis.Redis,
    tasks: TaskSet,
) -> None:
    """Slack's requests at /slack/events, checked and handed to `slack`'s Bolt app, with its
    token checked while the app serves."""
    app[REDIS] = redis
    app[TASKS] = tasks
    app[VERIFIER] = SignatureVerifier(settings.slack_signing_secret.get_secret_value())
    app[BOLT] = slack.bolt
    app[IN_FLIGHT] = slack.in_flight
    app.router.add_post("/slack/events", slack_events)
    if slack.acknowledged is not None:
        for watch in watch_for(settings, redis, [slack.acknowledged]):
            _run_in_background(app, watch)
    if not settings.console:  # the console's Slack is this process, and its token is its own
        _check_in_background(app, slack.bot_token.check)


def _check_in_background(
    app: web.Application, check: Callable[[Shutdown], Coroutine[Any, Any, None]]
) -> None:
    """Run `check` while the app serves; stop it on shutdown."""

    async def running(_: web.Application) -> AsyncIterator[None]:
        stopping = Shutdown()
        task = asyncio.get_running_loop().create_task(check(stopping))
        yield
        stopping.set()
        await task

    app.cleanup_ctx.append(running)


def _run_in_background(app: web.Application, loop: PrimaryWatch) -> None:
    """Run `loop` while the app serves; stop it on shutdown."""

    async def running(_: web.Application) -> AsyncIterator[None]:
        task = asyncio.get_running_loop().create_task(loop.run(), name=loop.name)
        yield
        loop.stop()
        await task

    app.cleanup_ctx.append(running)


def _shutdown_budget(app: web.Application, settings: Settings) -> ShutdownBudget:
    shutdown = ShutdownBudget(seconds=settings.shutdown_grace_seconds)

    async def start_the_clock(_: web.Application) -> None:
        shutdown.start()

    # First of the shutdown hooks: the budget covers them, the requests and the cleanup.
    app.on_shutdown.append(start_the_clock)
    return shutdown


def _watch_redis(
    app: web.Application, settings: Settings, redis: aioredis.Redis
) -> EvictionPolicyLog:
    """Serve at once (Slack and /healthz get their answers) and tell the operator, once per
    attempt, while Redis does not answer yet; then check its eviction policy."""
    eviction_log = EvictionPolicyLog()

    async def reached(stopping: Shutdown) -> None:
        if await wait_until_reachable(redis, setting=settings.redis_url_setting, stopping=stopping):
            await eviction_log.check(redis)

    _check_in_background(app, reached)
    return eviction_log


def _add_console(
    app: web.Application,
    settings: Settings,
    *,
    session: aiohttp.ClientSession,
    redis: aioredis.Redis,
    agent_names: list[str],
) -> None:
    # Imported here, not at the top: only a process with CONSOLE=true loads the console.
    from bot.console.routes import add_console

    add_console(
        app,
        settings,
        session=session,
        redis=redis,
        agent_names=agent_names,
        scripted_model=uses_scripted_model(settings),
    )


def _closing(
    tasks: TaskSet, shutdown: ShutdownBudget, *, closing: tuple[Callable[[], Awaitable[None]], ...]
) -> Callable[[web.Application], Awaitable[None]]:
    async def close(_: web.Application) -> None:
        # Cleanup runs after in-flight requests finished, so every task they spawned is here.
        pending = len(tasks)
        await tasks.wait(grace=shutdown.left(keep=CLOSING_SECONDS))
        log.info("shutdown: %d Slack update(s) drained, %d cancelled", pending, tasks.cancel_all())
        for close_one in closing:
            await close_one()
        log.info("stopped, %.1f s after the stop signal", shutdown.taken())

    return close
