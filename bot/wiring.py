"""The parts both processes (and the demo and the tests) build the same way, built once here."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
import redis.asyncio as aioredis
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvers import ApproverDirectory
from bot.settings import Settings
from bot.slack_client import slack_client
from bot.slack_reach import SlackReach
from bot.slack_reporter import SlackReporter
from runtime.keys import Keys
from runtime.redis_connection import connect


@dataclass(frozen=True, kw_only=True, slots=True)
class SlackParts:
    client: AsyncWebClient
    directory: ApproverDirectory
    reporter: SlackReporter
    reach: SlackReach


def slack_parts(
    settings: Settings, *, redis: aioredis.Redis, session: aiohttp.ClientSession
) -> SlackParts:
    client = slack_client(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.effective_slack_api_url,
        session=session,
    )
    directory = ApproverDirectory(redis, Keys(settings.redis_key_prefix), client)
    reach = SlackReach(client, directory)
    return SlackParts(
        client=client,
        directory=directory,
        reporter=SlackReporter(client, directory, reach),
        reach=reach,
    )


def web_redis(settings: Settings) -> aioredis.Redis:
    """Short timeouts: Slack wants an answer within 3 s, and a "try again" beats silence."""
    return connect(
        settings.effective_redis_url,
        tls_verify=settings.redis_tls_verify,
        tls_ca_file=settings.redis_tls_ca_file,
        socket_timeout=1.0,
        connect_timeout=0.5,
        retries=1,
    )


def worker_redis(settings: Settings) -> aioredis.Redis:
    """The default timeouts and retries: the worker rides out a short outage."""
    return connect(
        settings.effective_redis_url,
        tls_verify=settings.redis_tls_verify,
        tls_ca_file=settings.redis_tls_ca_file,
    )
