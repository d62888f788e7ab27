"""The web process: Slack's requests in at /slack/events, a health check at /healthz.

With `SLACK_APP_TOKEN` set, Slack's requests come over Socket Mode instead (`bot.web.socket_mode`);
with `CONSOLE=true` it also serves the local console (`bot.console`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.request.internals import parse_body
from slack_sdk.signature import SignatureVerifier

from bot.blocks.cards import (
    ACTION_APPROVE,
    ACTION_APPROVE_ALWAYS,
    ACTION_REJECT,
    ACTION_VIEW_ARGUMENTS,
    REJECT_CALLBACK,
)
from bot.blocks.edits import ACTION_EDIT, EDIT_CALLBACK
from bot.blocks.grants import ACTION_GRANT, ACTION_REVOKE_GRANT
from bot.blocks.status import ACTION_STOP
from bot.console.routes import add_console
from bot.home.routes import add_home_tab, run_home_watch
from bot.home.watch import HomeWatch
from bot.listeners.approvals import ApprovalActions
from bot.listeners.commands import AgentCommand
from bot.listeners.edits import EditActions
from bot.listeners.gate import ApprovalGate
from bot.listeners.grants import GrantActions
from bot.listeners.status import RunStatus
from bot.listeners.stops import StopActions
from bot.settings import Settings
from bot.slack.client import CLICK_LOOKUP_SECONDS, directory_client
from bot.slack.directory import ApproverDirectory
from bot.slack.links import ThreadLinks
from bot.slack.members import WorkspaceMembers
from bot.slack.payloads import malformed
from bot.web.operations import add_operations
from bot.web.socket_mode import add_socket_mode
from bot.wiring import blocking_reads_redis, replication_for, slack_parts
from runtime.audit.trail import AuditTrail
from runtime.db.connection import wait_until_reachable
from runtime.db.eviction import EvictionPolicyLog
from runtime.db.keys import Keys
from runtime.decisions.recorder import DecisionRecorder
from runtime.grants.store import GrantStore
from runtime.jobs.queue import JobQueue
from runtime.mcp.listing import McpListings
from runtime.models.scripted import uses_scripted_model
from runtime.policy import parse_principals
from runtime.process.shutdown import Shutdown
from runtime.process.shutdown_budget import ShutdownBudget
from runtime.process.tasks import TaskSet
from runtime.runs.live import LiveRuns
from runtime.stops.stopper import Principals, RunStopper

log = logging.getLogger(__name__)

BOLT: web.AppKey[AsyncApp] = web.AppKey("bolt", AsyncApp)
REDIS: web.AppKey[aioredis.Redis] = web.AppKey("redis", aioredis.Redis)
TASKS: web.AppKey[TaskSet] = web.AppKey("tasks", TaskSet)
VERIFIER: web.AppKey[SignatureVerifier] = web.AppKey("verifier", SignatureVerifier)

# Heroku gives 30 s between SIGTERM and SIGKILL; SHUTDOWN_GRACE_SECONDS (25) is the whole stop.
# Requests in flight get a share (Slack's are acknowledged within 3 s, so they need little), the
# Slack updates they spawned get the rest, less a moment to close the sessions.
REQUESTS_SHARE = 0.4
REQUESTS_MAX_SECONDS = 10.0
CLOSING_SECONDS = 1.0


def requests_grace(settings: Settings) -> float:
    """How long requests in flight at SIGTERM may finish (aiohttp's `shutdown_timeout`)."""
    return min(REQUESTS_MAX_SECONDS, settings.shutdown_grace_seconds * REQUESTS_SHARE)


def build_bolt(
    settings: Settings,
    *,
    redis: aioredis.Redis,
    session: aiohttp.ClientSession,
    agent_names: list[str],
    tasks: TaskSet,
) -> tuple[AsyncApp, HomeWatch]:
    """The Bolt app, and the watcher that republishes Home tabs (`run_home_watch`)."""
    keys = Keys.of(settings)
    replication = replication_for(settings, redis)
    parts = slack_parts(settings, redis=redis, session=session)
    client = parts.client
    _ignore_bolts_unused_token_warning()
    bolt = AsyncApp(
        client=client,
        signing_secret=settings.slack_signing_secret.get_secret_value(),
        # The acknowledgement leaves after the listener returns, i.e. after Redis has the
        # decision; nothing acknowledged can be lost to a restart.
        process_before_response=True,
    )
    audit = AuditTrail(redis, keys)
    # Clicks wait on the directory inside Slack's 3 s: its client never waits out a 429.
    click_client = directory_client(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.effective_slack_api_url,
        session=session,
    )
    directory = ApproverDirectory(redis, keys, click_client, lookup_seconds=CLICK_LOOKUP_SECONDS)
    members = WorkspaceMembers(redis, keys, click_client, lookup_seconds=CLICK_LOOKUP_SECONDS)
    if not settings.console:  # the console's Slack is this process: not listening yet
        tasks.spawn(members.warm(), name="installation")
    outsiders_allowed = settings.external_deciders == "allow"
    stops = StopActions(
        stopper=RunStopper(redis, keys, replication=replication),
        directory=directory,
        reporter=parts.reporter,
        client=client,
        tasks=tasks,
        admins=Principals.parse(parse_principals(settings.admins)),
        members=members,
        outsiders_allowed=outsiders_allowed,
    )
    recorder = DecisionRecorder(redis, keys, replication=replication)
    actions = ApprovalActions(
        recorder=recorder,
        client=client,
        reporter=parts.reporter,
        gate=ApprovalGate(directory=directory, recorder=recorder, members=members),
        tasks=tasks,
    )
    grants = GrantActions(
        actions=actions,
        store=GrantStore(redis, keys, replication=replication),
        client=client,
        members=members,
        outsiders_allowed=outsiders_allowed,
    )
    edits = EditActions(actions=actions, client=client)
    command = AgentCommand(
        queue=JobQueue(redis, keys, replication=replication),
        audit=audit,
        agents=agent_names,
        stops=stops,
        statuses=RunStatus(live=LiveRuns(redis, keys), links=ThreadLinks(client)),
        mcp_listings=McpListings(redis, keys),
        grants=grants,
    )
    membership = GroupMembershipEvents(directory=directory)
    bolt.command(re.compile(r"^/.*"))(command)
    bolt.action(ACTION_APPROVE)(actions.on_approve)
    bolt.action(ACTION_APPROVE_ALWAYS)(actions.on_approve)
    bolt.action(ACTION_REJECT)(actions.on_reject)
    bolt.action(ACTION_VIEW_ARGUMENTS)(actions.on_view_arguments)
    bolt.action(ACTION_STOP)(stops.on_stop_button)
    bolt.action(ACTION_GRANT)(grants.on_grant_chosen)
    bolt.action(ACTION_REVOKE_GRANT)(grants.on_revoke)
    bolt.action(ACTION_EDIT)(edits.on_edit)
    bolt.view(EDIT_CALLBACK)(edits.on_edit_submitted)
    bolt.view(REJECT_CALLBACK)(actions.on_reject_submitted)
    home_watch = add_home_tab(
        bolt,
        redis=redis,
        keys=keys,
        parts=parts,
        recorder=recorder,
        stops=stops,
        tasks=tasks,
        members=members,
    )
    bolt.action(re.compile(r".*"))(_unknown_action)
    bolt.event("subteam_members_changed")(membership.on_members_changed)
    bolt.event("subteam_updated")(membership.on_group_updated)
    # The manifests subscribe to these so operators see them in the log; Slack wants a 200.
    bolt.event("app_uninstalled")(_app_event)
    bolt.event("tokens_revoked")(_app_event)
    return bolt, home_watch


class _ClientGivenOnPurpose(logging.Filter):
    """Bolt reads `SLACK_BOT_TOKEN` from the environment even when it is given a client (it has
    no other way to be told "no token"), then warns that the token will be unused. We give it our
    client on purpose (its base URL, session and retry handlers); the warning says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _ignore_bolts_unused_token_warning() -> None:
    bolt_log = logging.getLogger(f"slack_bolt.{AsyncApp.__name__}")
    if not any(isinstance(f, _ClientGivenOnPurpose) for f in bolt_log.filters):
        bolt_log.addFilter(_ClientGivenOnPurpose())


@dataclass(kw_only=True)
class GroupMembershipEvents:
    """Slack says a user group changed: forget what we cached about it."""

    directory: ApproverDirectory

    async def on_members_changed(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        group = event.get("subteam_id")
        if isinstance(group, str):
            await self.directory.forget_group(group)

    async def on_group_updated(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        group = (event.get("subteam") or {}).get("id")
        if isinstance(group, str):
            await self.directory.forget_group(group)


async def _unknown_action(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    log.info("click on an unknown action refused")


async def _app_event(ack: AsyncAck, body: dict[str, Any]) -> None:
    await ack()
    event = body.get("event")
    kind = event.get("type") if isinstance(event, dict) else None
    log.warning("Slack says %s for team %s", kind, body.get("team_id"))


async def slack_events(request: web.Request) -> web.StreamResponse:
    # Bolt would trip over a body Slack never sends, even while building its request object, so
    # the signature and the body's shape are checked first.
    raw = await request.text()
    if not request.app[VERIFIER].is_valid_request(raw, dict(request.headers)):
        return web.json_response({"error": "invalid request"}, status=401)
    try:
        reason = malformed(parse_body(raw, request.content_type))
    except ValueError:
        reason = "not JSON"
    if reason is not None:
        log.warning("signed request with a malformed body refused: %s", reason)
        return web.json_response({"ok": False, "error": "malformed_payload"}, status=400)
    response = await request.app[BOLT].async_dispatch(await to_bolt_request(request))
    return await to_aiohttp_response(response)


async def healthz(request: web.Request) -> web.Response:
    try:
        await request.app[REDIS].ping()
    except RedisError:
        return web.json_response({"ok": False, "redis": "unreachable"}, status=503)
    return web.json_response({"ok": True})


async def create_web_app(
    settings: Settings, *, redis: aioredis.Redis, agent_names: list[str]
) -> web.Application:
    """Build the app inside the running loop (the HTTP session needs one)."""
    app = web.Application(client_max_size=1024**2)
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))
    tasks = TaskSet("slack")
    app[REDIS] = redis
    app[TASKS] = tasks
    app[VERIFIER] = SignatureVerifier(settings.slack_signing_secret.get_secret_value())
    app[BOLT], home_watch = build_bolt(
        settings, redis=redis, session=session, agent_names=agent_names, tasks=tasks
    )
    reads = blocking_reads_redis(settings)
    run_home_watch(app, replace(home_watch, reads=reads))
    app.router.add_post("/slack/events", slack_events)
    app.router.add_get("/healthz", healthz)
    shutdown = ShutdownBudget(seconds=settings.shutdown_grace_seconds)

    async def start_the_clock(_: web.Application) -> None:
        shutdown.start()

    # First of the shutdown hooks: the budget covers them, the requests and the cleanup.
    app.on_shutdown.append(start_the_clock)

    eviction_log = EvictionPolicyLog()

    async def _reached(stopping: Shutdown) -> None:
        if await wait_until_reachable(redis, setting=settings.redis_url_setting, stopping=stopping):
            await eviction_log.check(redis)

    async def watch_redis(_: web.Application) -> AsyncIterator[None]:
        # Serve at once (Slack and /healthz get their answers) and tell the operator, once per
        # attempt, while Redis does not answer yet.
        stopping = Shutdown()
        watch = asyncio.get_running_loop().create_task(_reached(stopping))
        yield
        stopping.set()
        await watch

    app.cleanup_ctx.append(watch_redis)
    add_operations(app, redis=redis, keys=Keys.of(settings), eviction_log=eviction_log)
    if settings.slack_app_token is not None and not settings.console:
        add_socket_mode(app, app[BOLT], settings.slack_app_token.get_secret_value())
    if settings.console:
        add_console(
            app,
            settings,
            session=session,
            redis=redis,
            agent_names=agent_names,
            scripted_model=uses_scripted_model(settings),
        )

    async def close(_: web.Application) -> None:
        # Cleanup runs after in-flight requests finished, so every task they spawned is here.
        pending = len(tasks)
        await tasks.wait(grace=shutdown.left(keep=CLOSING_SECONDS))
        log.info("shutdown: %d Slack update(s) drained, %d cancelled", pending, tasks.cancel_all())
        await session.close()
        await reads.aclose()
        await redis.aclose()

    app.on_cleanup.append(close)
    return app
