"""The Home tab wired into Bolt: its event, its buttons, and the watcher that republishes it."""

from __future__ import annotations

import asyncio
import contextlib

import redis.asyncio as aioredis
from aiohttp import web
from slack_bolt.app.async_app import AsyncApp

from bot.home.actions import HomeActions
from bot.home.blocks import (
    ACTION_HOME_APPROVE,
    ACTION_HOME_APPROVE_ALWAYS,
    ACTION_HOME_APPROVE_NOTE,
    ACTION_HOME_REJECT,
    ACTION_HOME_STOP,
    ACTION_HOME_VIEW_ARGUMENTS,
)
from bot.home.pace import PUBLISHES_PER_MINUTE, PublishRate
from bot.home.tab import HomeTab
from bot.home.watch import HomeWatch
from bot.listeners.gate import ApprovalGate
from bot.listeners.stops import StopActions
from bot.slack.channel_members import ChannelMembers
from bot.slack.client import publish_client
from bot.slack.directory import ApproverDirectory
from bot.slack.events import HomeOpened, listener
from bot.slack.in_flight import InFlight
from bot.slack.members import WorkspaceMembers
from bot.wiring import SlackParts
from runtime.db import Keys
from runtime.decisions import DecisionRecorder
from runtime.failover import AcknowledgedDecisions
from runtime.process import TaskSet
from runtime.runs import LiveRuns
from runtime.waiting import WaitingIndex

WATCH: web.AppKey[asyncio.Task[None]] = web.AppKey("home_watch", asyncio.Task)
PUBLISHER: web.AppKey[asyncio.Task[None]] = web.AppKey("home_publisher", asyncio.Task)
STOP_SECONDS = 5.0
"""How long the watch and the publisher each get to stop before they are cancelled."""


def add_home_tab(
    bolt: AsyncApp,
    *,
    redis: aioredis.Redis,
    keys: Keys,
    parts: SlackParts,
    recorder: DecisionRecorder,
    stops: StopActions,
    tasks: TaskSet,
    members: WorkspaceMembers,
    channels: ChannelMembers,
    quick_approval_seconds: float,
    publishes_per_minute: int = PUBLISHES_PER_MINUTE,
    in_flight: InFlight | None = None,
    acknowledged: AcknowledgedDecisions | None = None,
) -> HomeWatch:
    """Register the Home tab's listeners (before any catch-all); returns its watcher, for
    `run_home_watch`. `redis` is the tab's own (`bot.wiring.home_tab_redis`): what a tab shows
    is read on it, the decisions taken on the tab go through `recorder`, on the clicks' own.
    `members` and `channels` answer within a click's time; the tabs ask who is in a channel
    with the client that waits out Slack's 429s."""
    directory = ApproverDirectory(redis, keys, parts.client)
    # Shares its cache with `channels` (in Redis): only the lookups' bounds differ.
    listed = ChannelMembers(redis, keys, parts.client)
    home = HomeTab(
        redis=redis,
        keys=keys,
        client=publish_client(parts.client),
        directory=directory,
        recorder=DecisionRecorder(redis, keys),
        index=WaitingIndex(redis, keys),
        live=LiveRuns(redis, keys),
        links=parts.links,
        channels=listed,
        members=members,
        rate=PublishRate(redis=redis, keys=keys, per_minute=publishes_per_minute),
        in_flight=in_flight,
    )
    actions = HomeActions(
        home=home,
        gate=ApprovalGate(
            directory=parts.directory,
            recorder=recorder,
            members=members,
            channels=channels,
            quick_approval_seconds=quick_approval_seconds,
        ),
        reporter=parts.reporter,
        stops=stops,
        client=parts.client,
        tasks=tasks,
        acknowledged=acknowledged,
    )
    bolt.event("app_home_opened")(listener(HomeOpened, actions.on_home_opened))
    bolt.action(ACTION_HOME_APPROVE)(actions.on_approve)
    bolt.action(ACTION_HOME_APPROVE_ALWAYS)(actions.on_approve)
    bolt.action(ACTION_HOME_REJECT)(actions.on_reject)
    bolt.action(ACTION_HOME_APPROVE_NOTE)(actions.on_note)
    bolt.action(ACTION_HOME_STOP)(actions.on_stop)
    bolt.action(ACTION_HOME_VIEW_ARGUMENTS)(actions.on_view_arguments)
    return HomeWatch(
        redis=redis, keys=keys, home=home, directory=directory, channels=listed, tasks=tasks
    )


def run_home_watch(app: web.Application, watch: HomeWatch) -> None:
    """Follow the audit trail, and publish the tabs it changes, while the web app runs: one
    publisher loop per process (`bot.home.publisher`)."""
    publisher = watch.home.publisher

    async def start(app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        app[WATCH] = loop.create_task(watch.run(), name="home-watch")
        app[PUBLISHER] = loop.create_task(publisher.run(), name="home-publisher")

    async def stop(app: web.Application) -> None:
        watch.stop()
        publisher.stop()
        for task in (app[WATCH], app[PUBLISHER]):
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, timeout=STOP_SECONDS)

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)
