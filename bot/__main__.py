"""Process entry points: `python -m bot web` and `python -m bot worker` (see Procfile), and
`python -m bot demo` (everything in one process, with the local console: see
bot/demo.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

import aiohttp
from aiohttp import web

from bot.settings import Settings, SettingsError, load_settings, with_console_defaults
from bot.web.app import create_web_app, requests_grace
from bot.wiring import blocking_reads_redis, web_redis, worker_redis
from bot.worker import slack_worker
from runtime.models import share_openai_client, uses_scripted_model
from runtime.policy import Policy, PolicyError, load_policy
from runtime.process import configure_logging
from runtime.registry import AgentRegistry, RegistryError, load_registry
from runtime.worker import serve_until_signalled

log = logging.getLogger("countersign")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description=__doc__)
    parser.add_argument("process", choices=["web", "worker", "demo"])
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.process == "demo":
        # Imported only here: `web` and `worker` do not load the console.
        from bot.demo import run_demo

        return run_demo(os.environ, Path.cwd())
    try:
        settings = load_settings(with_console_defaults(os.environ))
        registry = load_registry(settings.agents)
        policy = load_policy(settings)
    except (SettingsError, RegistryError, PolicyError) as error:
        print(error, file=sys.stderr)
        return 2
    configure_logging(settings.log_format)
    if args.process == "web":
        run_web(settings, registry.names, policy)
    else:
        os.nice(settings.worker_niceness)
        asyncio.run(run_worker(settings, registry, policy))
    return 0


def run_web(settings: Settings, agent_names: list[str], policy: Policy) -> None:
    redis = web_redis(settings)
    app = create_web_app(settings, redis=redis, agent_names=agent_names, policy=policy)
    # The console has no login: it stays on this machine.
    host = "127.0.0.1" if settings.console else "0.0.0.0"

    def listening(_: str) -> None:
        # aiohttp calls this once its sites are listening (instead of printing its banner).
        log.info("web: listening on http://%s:%d (%s)", host, settings.port, serving(settings))

    web.run_app(
        app,
        host=host,
        port=settings.port,
        shutdown_timeout=requests_grace(settings),
        print=listening,
    )


def serving(settings: Settings) -> str:
    if settings.console:
        return f"the console: http://localhost:{settings.port}/console"
    if settings.slack_app_token is not None:
        return "health and metrics; Slack's requests come over Socket Mode"
    return "Slack's requests at /slack/events, health at /healthz"


async def run_worker(settings: Settings, registry: AgentRegistry, policy: Policy) -> None:
    redis = worker_redis(settings)
    reads = blocking_reads_redis(settings)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        worker = slack_worker(
            settings,
            redis=redis,
            session=session,
            registry=registry,
            policy=policy,
            reads=reads,
        )
        if uses_scripted_model(settings):
            log.warning("no OPENAI_API_KEY: the example agents run on a scripted model")
        elif settings.openai_api_key is not None:
            share_openai_client(settings.worker_concurrency)
        try:
            await serve_until_signalled(worker)
        finally:
            await reads.aclose()
            await redis.aclose()


if __name__ == "__main__":
    sys.exit(main())
