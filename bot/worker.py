"""A worker that reports through Slack: the wiring shared by `python -m bot worker` and the demo."""

from __future__ import annotations

import aiohttp
import redis.asyncio as aioredis
from agents import RunConfig

from bot.reporting.grant_notices import DirectoryMembership, SlackGrantNotices
from bot.reporting.questions import SlackQuestions
from bot.settings import Settings
from bot.slack.bot_token import BotToken
from bot.wiring import slack_parts
from runtime.db import Keys
from runtime.grants import GrantStore
from runtime.models import model_run_config
from runtime.policy import Policy
from runtime.registry import AgentRegistry
from runtime.worker import Agents, People, Worker, build_worker

WORKER_FIX = (
    f"{Settings.fix('SLACK_BOT_TOKEN')} Meanwhile nothing is posted and runs wait where they are; "
    "none is lost."
)


def slack_worker(
    settings: Settings,
    *,
    redis: aioredis.Redis,
    session: aiohttp.ClientSession,
    registry: AgentRegistry,
    policy: Policy,
    name: str | None = None,
    poll_interval: float | None = None,
    run_config: RunConfig | None = None,
    reads: aioredis.Redis | None = None,
) -> Worker:
    """`run_config` overrides the model the settings choose (tests point it at a fake);
    `reads` serves the idle worker's blocking reads (`build_worker`)."""
    parts = slack_parts(settings, redis=redis, session=session)
    return build_worker(
        settings,
        redis=redis,
        reads=reads,
        agents=Agents(
            registry=registry, policy=policy, run_config=run_config or model_run_config(settings)
        ),
        people=People(
            reporter=parts.reporter,
            reach=parts.reach,
            membership=DirectoryMembership(parts.directory),
            grant_notices=SlackGrantNotices(parts.client, GrantStore(redis, Keys.of(settings))),
            questions=SlackQuestions(
                parts.client, wait_seconds=settings.elicitation_timeout_seconds
            ),
            # The console's Slack is the web process itself, and its token its own.
            credentials=None
            if settings.console
            else BotToken(parts.client, links=parts.links, members=None, fix=WORKER_FIX),
        ),
        name=name,
        poll_interval=poll_interval,
    )
