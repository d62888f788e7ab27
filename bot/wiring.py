"""The parts both processes (and the demo and the tests) build the same way, built once here."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
import redis.asyncio as aioredis
from slack_sdk.web.async_client import AsyncWebClient

from bot.reporting.card_draws import CardDraws
from bot.reporting.copies import SlackReach
from bot.reporting.reminder_lines import ReminderLines
from bot.reporting.reporter import SlackReporter
from bot.reporting.sessions import AgentSessions
from bot.settings import Settings
from bot.slack.client import slack_client
from bot.slack.directory import ApproverDirectory
from bot.slack.links import ThreadLinks
from runtime.db import (
    BLOCKING_READS_SOCKET_TIMEOUT,
    Keys,
    Replication,
    connect_to,
    worker_pool_size,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SlackParts:
    client: AsyncWebClient
    directory: ApproverDirectory
    reporter: SlackReporter
    reach: SlackReach
    links: ThreadLinks
    """One per process: the workspace URL is asked of Slack once (`bot.slack.links`)."""


def slack_parts(
    settings: Settings, *, redis: aioredis.Redis, session: aiohttp.ClientSession
) -> SlackParts:
    client = slack_client(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.effective_slack_api_url,
        session=session,
    )
    directory = ApproverDirectory(redis, Keys.of(settings), client)
    reach = SlackReach(client, directory, self_approval=settings.allow_self_approval)
    return SlackParts(
        client=client,
        directory=directory,
        reporter=SlackReporter(
            client,
            directory,
            reach,
            ReminderLines(redis, Keys.of(settings)),
            CardDraws(redis, Keys.of(settings)),
            AgentSessions(client, enabled=settings.streaming),
        ),
        reach=reach,
        links=ThreadLinks(client),
    )


def replication_for(settings: Settings, redis: aioredis.Redis) -> Replication:
    """`WAIT` for `REDIS_MIN_REPLICAS` replicas after each decision and enqueue (0: never)."""
    return Replication.of(
        redis,
        Keys.of(settings),
        min_replicas=settings.redis_min_replicas,
        wait_ms=settings.redis_wait_ms,
    )


def web_redis(settings: Settings) -> aioredis.Redis:
    """Short timeouts: Slack wants an answer within 3 s, and a "try again" beats silence."""
    # A `WAIT` answers only after `REDIS_WAIT_MS`: a read that times out before it would turn
    # "click again, the replicas are behind" into "the database is unreachable".
    waits = settings.redis_wait_ms / 1000 if settings.redis_min_replicas else 0.0
    return connect_to(settings, socket_timeout=1.0 + waits, connect_timeout=0.5, retries=1)


def home_tab_redis(settings: Settings) -> aioredis.Redis:
    """The web's Redis for Home tab work (reading what a fan-out of tabs shows), its own pool of
    `HOME_REDIS_CONNECTIONS`, so that a click never waits behind it for a connection."""
    return connect_to(
        settings,
        socket_timeout=2.0,
        connect_timeout=0.5,
        retries=1,
        max_connections=settings.home_redis_connections,
    )


def worker_redis(settings: Settings) -> aioredis.Redis:
    """The default timeouts and retries: the worker rides out a short outage. A connection for
    each run it may work on at once (`worker_pool_size`)."""
    return connect_to(settings, max_connections=worker_pool_size(settings.worker_concurrency))


def blocking_reads_redis(settings: Settings) -> aioredis.Redis:
    """For the blocking reads of an idle loop (new jobs, due-set wake-ups, the audit trail the
    Home tabs follow): a read may wait `BLOCKING_READ_SECONDS`, so an idle process sends a few
    commands a minute instead of a few a second. Its socket timeout outlasts such a read, where
    the process's own client must time out in seconds (the web's in one: Slack waits 3 s)."""
    # Three blocking reads per shard (jobs, due-set wake-ups, stops) may wait at once, and the
    # web's Home-tab watch one per shard.
    connections = 8 + 3 * settings.shard_count
    return connect_to(
        settings, socket_timeout=BLOCKING_READS_SOCKET_TIMEOUT, max_connections=connections
    )
