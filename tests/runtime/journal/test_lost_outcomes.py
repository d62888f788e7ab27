"""A call whose outcome was lost runs again only when a person says so, on real processes.

A worker killed inside an approved tool leaves a start mark without an outcome: the retry does
not run the tool but posts a "may have run" card (Run again / Reject). A tool declared safe to
repeat runs again without asking. A Redis away for longer than the journal's old 30 s deadline
as a tool returns no longer makes the tool run twice.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest

from runtime.db.local import RedisServer
from tests.runtime.grants.test_grants import grant_options
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, message, shell_call, tool_call
from tests.support.fake_slack import Message
from tests.test_faults import (
    killed_inside_the_tool,
    ledger,
    lost_card,
    migrate_then_answer,
    wait_for_ledger,
)

LOST = "`migrate` may have run; its result was lost"


def warm_then_answer(request: ModelRequest) -> list[dict[str, object]]:
    if not request.tool_outputs:
        return [tool_call("warm_cache", {"region": "eu"}, "call_warm")]
    return [message(request.tool_outputs["call_warm"])]


async def events(deployment: Deployment) -> list[str]:
    return [fields[b"event"].decode() for fields in await deployment.audit_entries()]


def labels(card: Message) -> list[str]:
    return [str(action["text"]["text"]) for action in card.actions()]


async def test_a_worker_killed_inside_a_tool_asks_before_running_it_again(
    deployment: Deployment,
) -> None:
    deployment.model.script = migrate_then_answer
    root, _ = await killed_inside_the_tool(deployment, "migrate users")

    again = await lost_card(deployment, root)
    assert LOST in again.all_text(), again.all_text()
    assert labels(again) == ["Run again", "Reject"]
    assert len(await ledger(deployment)) == 1, "not run again without a person"
    assert (await events(deployment)).count("outcome_lost") == 1

    await deployment.sender.click(again, "approve", user="UBOB")
    [answer] = await deployment.final_answers(root)
    assert answer.text.startswith("migrated users (attempt 2, key "), answer.text
    assert [e["call_id"] for e in await ledger(deployment)] == ["call_migrate", "call_migrate"]
    assert (await events(deployment)).count("executed") == 1


async def test_a_worker_killed_inside_a_shell_call_asks_before_running_it_again(
    deployment: Deployment,
) -> None:
    """The SDK hands whatever a shell executor raises to the model as the call's output: the
    journal's "may have run" must pass it by and reach the person as a card."""

    def script(request: ModelRequest) -> list[Item]:
        if "call_sh" not in request.tool_outputs:
            return [shell_call(["sleep 30"], "call_sh")]
        return [message("done: " + request.tool_outputs["call_sh"])]

    deployment.model.script = script
    root, _ = await killed_inside_the_tool(
        deployment, "wait a while", AGENTS="tests.support.shell_agents:REGISTRY"
    )
    again = await lost_card(deployment, root)
    assert "`shell` may have run; its result was lost" in again.all_text(), again.all_text()
    assert len(await ledger(deployment)) == 1, "not run again without a person"

    await deployment.sender.reject(again, user="UBOB", reason="it did run, I checked")
    [answer] = await deployment.final_answers(root)
    assert "may have run earlier, but its result was lost, and it was not run again" in (
        answer.text
    )
    assert len(await ledger(deployment)) == 1


async def test_rejecting_a_may_have_run_card_does_not_run_it_and_tells_the_model(
    deployment: Deployment,
) -> None:
    deployment.model.script = migrate_then_answer
    root, _ = await killed_inside_the_tool(deployment, "migrate users")

    again = await lost_card(deployment, root)
    await deployment.sender.reject(again, user="UBOB", reason="it did run, I checked")
    [answer] = await deployment.final_answers(root)
    assert "may have run earlier, but its result was lost, and it was not run again" in (
        answer.text
    )
    assert "it did run, I checked" in answer.text
    assert len(await ledger(deployment)) == 1
    assert "executed" not in await events(deployment)


async def test_a_tool_safe_to_repeat_runs_again_without_asking(deployment: Deployment) -> None:
    deployment.model.script = warm_then_answer
    root, _ = await killed_inside_the_tool(
        deployment, "warm the eu cache", AGENTS="tests.support.agents:REPEATABLE_REGISTRY"
    )

    [answer] = await deployment.final_answers(root)
    assert answer.text == "warmed eu (attempt 2)"
    assert len(deployment.slack.cards()) == 1, "no second card"
    assert "outcome_lost" not in await events(deployment)


@pytest.mark.chaos  # Redis away for 40 s
async def test_redis_away_for_40_s_as_an_approved_tool_returns_runs_it_once(
    durable_redis: RedisServer, tmp_path: Path
) -> None:
    async with Deployment(durable_redis.url, "away:", tmp_path) as deployment:
        deployment.model.script = migrate_then_answer
        await deployment.web()
        deployment.worker("worker.1", SLOW_TOOL_SECONDS="2")
        root = await deployment.start_run("migrate users")
        [card] = await deployment.cards(root, 1)
        await deployment.sender.click(card, "approve", user="UBOB")
        await wait_for_ledger(deployment, 1)

        durable_redis.stop()  # the tool returns in 2 s, into an outage longer than 30 s
        await asyncio.sleep(40)
        durable_redis.start()
        await deployment.redis.connection_pool.disconnect()  # the test's own, closed by the stop

        [answer] = await deployment.final_answers(root)
        assert answer.text.startswith("migrated users (attempt 1, key "), answer.text
        assert len(await ledger(deployment)) == 1, deployment.logs_text()
        assert (await events(deployment)).count("executed") == 1
        assert len(deployment.slack.cards()) == 1, "no may-have-run card either"


async def test_only_a_person_who_may_decide_the_call_may_run_it_again(
    deployment: Deployment, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\ntool = "migrate"\napprovers = ["UBOB"]\n')
    deployment.model.script = migrate_then_answer
    root, _ = await killed_inside_the_tool(deployment, "migrate users", POLICY_FILE=str(policy))
    again = await lost_card(deployment, root)

    await deployment.sender.click(again, "approve", user="UCAROL")
    notes = await deployment.slack.wait_for(
        lambda: [e for e in deployment.slack.ephemerals if "may decide" in str(e["text"])],
        10,
        "a note to UCAROL",
    )
    assert "may decide `migrate`, so nothing was recorded" in str(notes[0]["text"])
    assert again.action_ids()[0] == "approve", "still open"
    assert len(await ledger(deployment)) == 1

    await deployment.sender.click(again, "approve", user="UBOB")
    [answer] = await deployment.final_answers(root)
    assert answer.text.startswith("migrated users (attempt 2, key "), answer.text


async def test_a_call_the_policy_let_run_that_may_have_run_ends_the_run_saying_so(
    deployment: Deployment, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rule]]\ntool = "migrate"\nauto = "approve"\n')
    deployment.model.script = migrate_then_answer
    env = {"POLICY_FILE": str(policy)}
    await deployment.web(**env)
    workers = {name: deployment.worker(name, **env) for name in ("worker.1", "worker.2")}
    root = await deployment.start_run("migrate users")
    await wait_for_ledger(deployment, 1)  # no card: the policy approved it, and it runs
    owner = await deployment.job_owner()
    assert owner in workers
    workers[owner].signal(signal.SIGKILL)

    [ending] = await deployment.final_answers(root)
    assert "`migrate` may have run; its result was lost, so it was not run again" in ending.text
    assert len(await ledger(deployment)) == 1
    assert deployment.slack.cards() == []
    assert (await events(deployment)).count("auto_approved") == 1, await events(deployment)


async def test_a_call_a_grant_let_run_that_may_have_run_uses_the_grant_once(
    deployment: Deployment,
) -> None:
    """The redelivered job replays the model turn whose call the grant covered: the grant
    answers as it did, so its use is counted and audited once, and the call is not run again
    without a person."""

    def script(request: ModelRequest) -> list[Item]:
        # `migrate` is slow on each call id's first attempt: the second run's is cut off.
        call_id = "call_again" if "again" in request.task else "call_first"
        if call_id not in request.tool_outputs:
            return [tool_call("migrate", {"table": "users"}, call_id)]
        return [message(request.tool_outputs[call_id])]

    deployment.model.script = script
    deployment.slack.channels["CGENERAL"] = "general"
    env = {"SLOW_TOOL_SECONDS": "5"}
    await deployment.web(**env)
    workers = {name: deployment.worker(name, **env) for name in ("worker.1", "worker.2")}
    first = await deployment.start_run("migrate users")
    [card] = await deployment.cards(first, 1)
    hour = grant_options(card)["migrate in #general for 1 hour"]
    await deployment.sender.choose_grant(card, hour, user="UBOB")
    await deployment.final_answers(first)

    second = await deployment.start_run("migrate users again")
    await wait_for_ledger(deployment, 2)  # no card: the grant covered it, and it runs
    owner = await deployment.job_owner()
    assert owner in workers
    workers[owner].signal(signal.SIGKILL)

    [ending] = await deployment.final_answers(second)
    assert "`migrate` may have run; its result was lost, so it was not run again" in ending.text
    assert len(await ledger(deployment)) == 2, "not run again without a person"
    used = [e for e in await deployment.audit_entries() if e[b"event"] == b"grant_used"]
    assert len(used) == 1, used
    assert json.loads(used[0][b"details"])["uses"] == 1
    thread = deployment.slack.thread(second.channel, second.ts)
    assert len([m for m in thread if "'s grant" in m.text]) == 1, "\n".join(m.text for m in thread)
