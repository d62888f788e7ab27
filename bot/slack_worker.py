"""A worker that reports through Slack: the wiring shared by `python -m bot worker` and the demo."""

from __future__ import annotations

import aiohttp
import redis.asyncio as aioredis

from bot.approvers import ApproverDirectory
from bot.settings import Settings
from bot.slack_client import slack_client
from bot.slack_reporter import SlackReporter
from runtime.keys import Keys
from runtime.policy import Policy
from runtime.registry import AgentRegistry
from runtime.scripted_model import model_run_config
from runtime.worker import Worker, build_worker


def slack_worker(
    settings: Settings,
    *,
    redis: aioredis.Redis,
    session: aiohttp.ClientSession,
    registry: AgentRegistry,
    policy: Policy,
    name: str | None = None,
    poll_interval: float = 1.0,
) -> Worker:
    client = slack_client(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.effective_slack_api_url,
        session=session,
    )
    directory = ApproverDirectory(redis, Keys(settings.redis_key_prefix), client)
    return build_worker(
        settings,
        redis=redis,
        reporter=SlackReporter(client, directory),
        registry=registry,
        policy=policy,
        run_config=model_run_config(settings),
        name=name,
        poll_interval=poll_interval,
    )
