"""`python -m bot demo`: all of Countersign on one machine, with nothing set up beforehand.

One process runs what a deployment runs as several: a Redis (`runtime.db.local`: the one
`REDIS_URL` names, else a real `redis-server` of its own with its files in `.redis/`), the web
process with the console and its stand-in Slack, and a worker. Without `OPENAI_API_KEY` the example
agents run on the scripted model. Ctrl-C (or SIGTERM) stops all of it, Redis included.

`scripts/dev.py demo` installs the project and runs this.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path

import aiohttp
from aiohttp import web

from bot.console.workspace import demo_defaults
from bot.settings import (
    SLACK_CREDENTIALS,
    Settings,
    SettingsError,
    load_settings,
    with_console_defaults,
)
from bot.web.app import create_web_app, requests_grace
from bot.wiring import web_redis, worker_redis
from bot.worker import slack_worker
from runtime.db import DEMO_KEY_PREFIX, DEMO_REDIS_FOLDER, LocalRedisError, redis_for_demo
from runtime.models import uses_scripted_model
from runtime.policy import Policy, PolicyError, load_policy
from runtime.process import configure_logging
from runtime.registry import AgentRegistry, RegistryError, load_registry
from runtime.worker import serve_until_signalled

log = logging.getLogger(__name__)


def run_demo(environ: Mapping[str, str], folder: Path) -> int:
    """Start Redis if needed, then the web process and a worker; return the exit status."""
    try:
        redis_url, server = redis_for_demo(environ, folder / DEMO_REDIS_FOLDER)
    except LocalRedisError as error:
        print(error)
        return 2
    try:
        values = {"REDIS_KEY_PREFIX": DEMO_KEY_PREFIX, **demo_defaults(), **environ}
        values.update(CONSOLE="true", REDIS_URL=redis_url, REDIS_TLS_URL="")
        # The demo never talks to Slack: credentials left in the shell are not the console's.
        values.update(dict.fromkeys(SLACK_CREDENTIALS, ""))
        try:
            settings = load_settings(with_console_defaults(values))
            registry = load_registry(settings.agents)
            policy = load_policy(settings)
        except (SettingsError, RegistryError, PolicyError) as error:
            print(error)
            return 2
        configure_logging(settings.log_format)
        started = f"its own, files in {folder / DEMO_REDIS_FOLDER}" if server else "REDIS_URL"
        try:
            asyncio.run(serve(settings, registry, policy, redis=f"{redis_url} ({started})"))
        except OSError as error:
            print(
                f"The console cannot listen on port {settings.port} ({error.strerror}). "
                "Set PORT to a free port, e.g. PORT=3001."
            )
            return 2
    finally:
        if server is not None:
            server.stop()
    return 0


async def serve(settings: Settings, registry: AgentRegistry, policy: Policy, *, redis: str) -> None:
    redis_for_web = web_redis(settings)
    redis_for_worker = worker_redis(settings)
    app = await create_web_app(
        settings, redis=redis_for_web, agent_names=registry.names, policy=policy
    )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=requests_grace(settings))
    await runner.setup()
    try:
        # The console has no login: it stays on this machine.
        await web.TCPSite(runner, "127.0.0.1", settings.port).start()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            worker = slack_worker(
                settings, redis=redis_for_worker, session=session, registry=registry, policy=policy
            )
            print(banner(settings, redis), flush=True)
            await serve_until_signalled(worker)
    finally:
        await runner.cleanup()
        await redis_for_worker.aclose()


def banner(settings: Settings, redis: str) -> str:
    model = (
        "scripted (no OPENAI_API_KEY: canned replies, real tools and approvals)"
        if uses_scripted_model(settings)
        else "OpenAI (OPENAI_API_KEY is set)"
    )
    return (
        f"\nCountersign console: http://localhost:{settings.port}/console\n"
        f"  model:  {model}\n"
        f"  redis:  {redis}\n"
        "  Ctrl-C stops everything.\n"
    )
