"""Our resume path against the bare SDK, with the same instant model over HTTP.

    .venv/bin/python -m bench.resume_path [--runs 200]

Ours: `RunExecutor.resume` on a decided run (claim it in Redis, load and decompress the state,
`RunState.from_string`, apply the decision with its digest check, `Runner.run`, post the answer
to Slack, delete the run). Bare: `RunState.from_string` of the same state JSON, `approve`,
`Runner.run`, nothing stored, nothing posted. Both call the same fake Responses endpoint and
run the same tool; they alternate, so drift hits both. Target: ours <= 1.3x bare.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from agents import OpenAIProvider, RunConfig, Runner, RunState
from openai import AsyncOpenAI

from bench.harness import approve_then_answer, header, report
from bot.reporting.reporter import SlackReporter
from bot.slack.client import slack_client
from bot.slack.directory import ApproverDirectory
from runtime.audit.trail import AuditTrail
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import RedisServer
from runtime.decisions.recorder import Choice, DecisionRecorder
from runtime.jobs.contracts import Conversation, ResumeJob, StartJob, new_run_id
from runtime.models.install import install_journal
from runtime.policy import load_policy
from runtime.record.store import RunStore
from runtime.registry import load_registry
from runtime.runs.executor import RunExecutor
from runtime.settings import RuntimeSettings
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import FakeSlack


async def measure(runs: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory))
        server.start()
        slack, model = FakeSlack(), FakeOpenAI(approve_then_answer)
        await slack.start()
        await model.start()
        redis = connect(server.url)
        openai = AsyncOpenAI(api_key="sk-bench", base_url=model.url)
        session = aiohttp.ClientSession()
        try:
            await compare(runs, redis, slack, openai, session)
        finally:
            await session.close()
            await openai.close()
            await redis.aclose()
            await model.stop()
            await slack.stop()
            server.stop()


async def compare(
    runs: int, redis: Any, slack: FakeSlack, openai: AsyncOpenAI, session: aiohttp.ClientSession
) -> None:
    settings = RuntimeSettings.from_environ({"AGENTS": "tests.support.agents:REGISTRY"})
    keys = Keys("bench-resume:")
    registry = load_registry(settings.agents)
    config = RunConfig(
        model_provider=OpenAIProvider(openai_client=openai, use_responses=True),
        tracing_disabled=True,
    )
    client = slack_client(token="xoxb-bench", base_url=slack.api_url, session=session)
    store, recorder = RunStore(redis, keys), DecisionRecorder(redis, keys)
    install_journal(registry)  # as the worker does: ours includes recording each tool's output
    executor = RunExecutor.of(
        registry=registry,
        store=store,
        reporter=SlackReporter(client, ApproverDirectory(redis, keys, client)),
        audit=AuditTrail(redis, keys),
        policy=load_policy(settings),
        max_turns=settings.max_turns,
        run_config=config,
    )
    agent = registry.get("ops")
    ours: list[float] = []
    bare: list[float] = []
    for number in range(runs + 5):
        run_id = new_run_id()
        conversation = Conversation(channel="CBENCH", requester="UALICE")
        job = StartJob(
            run_id=run_id,
            agent="ops",
            task=f"delete u-100 ({number})",
            conversation=conversation,
            requested_at=time.time(),
        )
        await executor.start(job)
        record = await store.load(run_id)
        assert record is not None and record.state is not None
        [call] = record.envelope.calls
        choice = Choice(outcome="approved", user_id="UBOB")
        view = await recorder.view(run_id, call.approval_id)
        decided = await recorder.decide(
            view, choice, channel="CBENCH", member_of=(), seen=call.digest
        )
        assert decided.resume_enqueued
        state_json = record.state

        started = time.perf_counter()
        state = await RunState.from_string(agent, state_json)
        for item in state.get_interruptions():
            state.approve(item)
        result = await Runner.run(agent, state, run_config=config)
        bare_ms = (time.perf_counter() - started) * 1000
        assert str(result.final_output).startswith("done")

        started = time.perf_counter()
        await executor.resume(ResumeJob(run_id=run_id, round=1))
        ours_ms = (time.perf_counter() - started) * 1000
        assert await store.load(run_id, with_state=False) is None, "finished and deleted"
        if number >= 5:  # the first few warm caches and connections
            ours.append(ours_ms)
            bare.append(bare_ms)
    report("bare SDK: restore, approve, run", bare)
    report("ours: resume job end to end", ours)
    ratio = statistics.median(ours) / statistics.median(bare)
    print(f"{'ratio of medians (ours / bare)':<40} {ratio:.2f}x   (target <= 1.3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    header("resume path vs bare SDK", f".venv/bin/python -m bench.resume_path --runs {args.runs}")
    asyncio.run(measure(args.runs))


if __name__ == "__main__":
    main()
