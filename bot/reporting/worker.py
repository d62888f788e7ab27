"""A worker that reports through Slack: the wiring shared by `python -m bot worker` and the demo."""

from __future__ import annotations

import aiohttp
import redis.asyncio as aioredis
from agents import RunConfig

from bot.reporting.grant_notices import DirectoryMembership, SlackGrantNotices
from bot.settings import Settings
from bot.wiring import slack_parts
from runtime.db import Keys
from runtime.grants import GrantStore
from runtime.models import model_run_config
from runtime.policy import Policy
from runtime.registry import AgentRegistry
from runtime.worker import Agents, People, Worker, build_worker


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
        ),
        name=name,
        poll_interval=poll_interval,
    )
