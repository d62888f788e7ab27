"""A retried job never re-issues a call: the model's turns are journaled and replayed.

Each test lets a call run without a card (Approve always, a grant, an automatic rule, a tool
that needs no approval, a call inside an agent used as a tool), then the model answers 5xx past
every try of the delivery (the tests' `MODEL_RETRIES=0` leaves the `openai` client's own three),
so the job is retried. The fake model, like a real one, gives each call a new id every time it is
asked: a retry that asked it again would run the call a second time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.db.keys import JOB_GROUP
from runtime.record.store import RunStore
from tests.runtime.grants.test_grants import grant_options
from tests.support import agents
from tests.support.fake_openai import Item, ModelError, ModelRequest, message, tool_call
from tests.support.harness import Harness

AUTO_APPROVE = '[[rule]]\ntool = "restart_service"\nauto = "approve"\n'


@pytest.fixture
def env_overrides(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The tests' settings (no retries inside the run: the job is retried), and `policy`, the
    text of a policy file."""
    env: dict[str, str] = dict(getattr(request, "param", {}))
    if (policy := env.pop("policy", None)) is not None:
        path = tmp_path / "policy.toml"
        path.write_text(policy)
        env["POLICY_FILE"] = str(path)
    return env


def failing_after(
    calls: Callable[[dict[str, str]], list[Item] | None], failures: int = 3
) -> Callable[[ModelRequest], list[Item] | ModelError]:
    """`calls(outputs)` while it asks for calls (each a new call id, as a real model gives);
    then 503 `failures` times, then an answer naming every output it was told."""
    failed = 0

    def script(request: ModelRequest) -> list[Item] | ModelError:
        nonlocal failed
        asked = calls(request.tool_outputs)
        if asked is not None:
            return asked
        if failed < failures:
            failed += 1
            return ModelError(503, "overloaded")
        return [message("done: " + ", ".join(sorted(request.tool_outputs.values())))]

    return script


def restart(*services: str) -> Callable[[dict[str, str]], list[Item] | None]:
    """Restart each of `services` in turn, one call per model turn."""

    def calls(outputs: dict[str, str]) -> list[Item] | None:
        if len(outputs) < len(services):
            return [tool_call("restart_service", {"service": services[len(outputs)]})]
        return None

    return calls


def executions() -> list[str]:
    """What ran, as `tool argument...`."""
    return [
        " ".join([tool, *map(str, arguments.values())]) for tool, arguments in agents.EXECUTIONS
    ]


async def test_a_call_approved_always_runs_once_when_the_job_is_retried(bot: Harness) -> None:
    bot.model.script = failing_after(restart("api", "search"))
    root = await bot.start_run("restart api and search")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve_always", user="UBOB")

    answer = await bot.final_answer(root, timeout=30)
    assert answer.text == "done: restarted api, restarted search"
    assert executions() == ["restart_service api", "restart_service search"]
    trail = await bot.audit_until("finished")
    assert [e["event"] for e in trail].count("executed") == 2


async def test_a_call_a_grant_approved_runs_once_when_the_job_is_retried(bot: Harness) -> None:
    bot.slack.channels["CGENERAL"] = "general"
    bot.model.script = failing_after(restart("api"), failures=0)
    first = await bot.start_run("restart the api")
    [card] = await bot.cards(first, 1)
    hour = grant_options(card)["restart_service in #general for 1 hour"]
    await bot.sender.choose_grant(card, hour, user="UBOB")
    assert (await bot.final_answer(first)).text == "done: restarted api"

    bot.model.script = failing_after(restart("search"))
    second = await bot.start_run("restart search")
    answer = await bot.final_answer(second, timeout=30)
    assert answer.text == "done: restarted search"
    assert executions() == ["restart_service api", "restart_service search"]
    assert [c for c in bot.slack.cards() if c.thread_ts == second.ts] == []


@pytest.mark.parametrize(
    ("env_overrides", "calls"),
    [
        pytest.param({"policy": AUTO_APPROVE}, restart("api"), id="auto-approve"),
        pytest.param(
            {},
            lambda outputs: None if outputs else [tool_call("list_users", {})],
            id="needs-no-approval",
        ),
    ],
    indirect=["env_overrides"],
)
async def test_a_call_no_person_decided_runs_once_when_the_job_is_retried(
    bot: Harness, calls: Callable[[dict[str, str]], list[Item] | None]
) -> None:
    bot.model.script = failing_after(calls)
    root = await bot.start_run("do it")
    answer = await bot.final_answer(root, timeout=30)
    assert answer.text.startswith("done: ")
    assert len(agents.EXECUTIONS) == 1, executions()
    assert bot.slack.cards() == []


@pytest.mark.parametrize(
    "env_overrides", [{"AGENTS": "tests.support.turn_agents:REGISTRY"}], indirect=True
)
async def test_calls_inside_agents_used_as_tools_run_once_when_the_job_is_retried(
    bot: Harness,
) -> None:
    """`front` asks `translate` twice at once; each inner run asks `look_up`. The inner run
    for "bye" then meets the outage and fails the job; the one for "hello" had returned. The
    retry replays `front`'s turn (the same two calls), reuses "hello"'s output, and replays
    "bye"'s inner turn: its `look_up` is not asked for anew."""
    failed = 0

    def script(request: ModelRequest) -> list[Item] | ModelError:
        nonlocal failed
        outputs = request.tool_outputs
        if "translate" in request.tools:
            if not outputs:
                return [
                    tool_call("translate", {"input": "hello"}),
                    tool_call("translate", {"input": "bye"}),
                ]
            return [message("front: " + ", ".join(sorted(outputs.values())))]
        word = "bye" if "bye" in request.task else "hello"
        if not outputs:
            return [tool_call("look_up", {"word": word})]
        if word == "bye" and failed < 3:
            failed += 1
            return ModelError(503, "overloaded")
        return [message(f"{word} is " + next(iter(outputs.values())))]

    bot.model.script = script
    root = await bot.start_run("translate hello and bye")
    answer = await bot.final_answer(root, timeout=30)
    assert answer.text == "front: bye is bye: found, hello is hello: found"
    assert failed == 3
    assert sorted(executions()) == ["look_up bye", "look_up hello"]


@pytest.mark.parametrize("env_overrides", [{"MODEL_RETRIES": ""}], indirect=True)  # default
async def test_a_short_model_outage_is_retried_inside_the_run_not_by_the_job(
    bot: Harness,
) -> None:
    """Five 503s in a row: past the `openai` client's own tries, within the run's retries (4
    by default). The job is delivered once, and the tool that ran before the outage ran once."""
    deliveries: list[int] = []
    failed = 0

    async def script(request: ModelRequest) -> list[Item] | ModelError:
        nonlocal failed
        if not request.tool_outputs:
            return [tool_call("list_users", {})]
        if failed < 5:
            failed += 1
            return ModelError(503, "overloaded")
        rows: Any = await bot.redis.xpending_range(bot.keys.jobs, JOB_GROUP, "-", "+", 10)
        deliveries.extend(row["times_delivered"] for row in rows)
        return [message("done")]

    bot.model.script = script
    root = await bot.start_run("list users")
    assert (await bot.final_answer(root, timeout=30)).text == "done"
    assert deliveries == [1], "the job was not given back during the outage"
    assert executions() == ["list_users"]


@pytest.mark.parametrize(
    "env_overrides", [{"AGENTS": "tests.support.turn_agents:REGISTRY"}], indirect=True
)
async def test_an_agent_tool_of_a_delivery_that_lost_its_run_is_not_recorded(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis away past the job's idle time: another delivery claims the run while this one is
    inside `translate`'s inner run. The inner `look_up` ran, so its output is recorded; the agent
    tool's own output is not: it comes from model turns the run's holder did not take, and,
    recorded, it would be replayed over what a person decides about the inner calls since (a
    "may have run" card of `look_up`, rejected: its inner agent must read that)."""
    store = RunStore(bot.redis, bot.keys)
    taken: list[str] = []

    async def script(request: ModelRequest) -> list[Item]:
        outputs = request.tool_outputs
        if "translate" in request.tools:
            if not outputs:
                return [tool_call("translate", {"input": "hello"})]
            return [message("front: " + ", ".join(outputs.values()))]
        if not outputs:
            return [tool_call("look_up", {"word": "hello"})]
        if not taken:  # the job's next delivery claims the run
            rows: Any = await bot.redis.xrange(bot.keys.audit, count=1)
            taken.append(rows[0][1][b"run_id"].decode())
            claim = await store.claim(taken[0], kind="start", round_=0)
            assert claim.status == "claimed"
        return [message("hello is " + next(iter(outputs.values())))]

    bot.model.script = script
    await bot.start_run("translate hello")
    for _ in range(200):  # this delivery stops; the next is the test's, which does nothing
        if any("another delivery of its job took over" in r.message for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the delivery did not stop")
    recorded = [json.loads(entry)["tool"] for entry in await store.journal(taken[0])]
    assert recorded == ["look_up"]
    assert executions() == ["look_up hello"]
    trail = await bot.audit_until("executed")
    assert [entry["tool"] for entry in trail if entry["event"] == "executed"] == ["look_up"]
