"""Agents the registry does not list, reached through a `handoff(agent)` object or used as tools
(`Agent.as_tool`), nested: their tools are journaled, their nested approvals resume through the
SDK's own path, and the card says which agent asked, inside which (issue 18, items 2 and 3).

All on real processes: `AGENTS=tests.support.graph_agents:REGISTRY` lists only `front`.
"""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

from agents import Agent
from agents._run_state_agent_identity import _iter_agent_graph

from bot.words.call_text import NO_ARGUMENTS
from runtime import examples
from runtime.agent_graph import callers, reachable_agents
from tests.conftest import with_env
from tests.runtime.decisions.test_edits import edit_button
from tests.support import agents, graph_agents
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelError, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.test_faults import ledger, lost_card, wait_for_ledger

GRAPH = {"AGENTS": "tests.support.graph_agents:REGISTRY"}


async def start(deployment: Deployment, workers: int = 1) -> dict[str, Any]:
    await deployment.web(**GRAPH)
    return {f"worker.{n}": deployment.worker(f"worker.{n}", **GRAPH) for n in range(1, workers + 1)}


async def events(deployment: Deployment) -> list[tuple[str, str]]:
    """(event, tool) of the audit trail."""
    return [
        (fields[b"event"].decode(), json.loads(fields[b"details"]).get("tool", ""))
        for fields in await deployment.audit_entries()
    ]


async def final_answer(deployment: Deployment, root: Message) -> Message:
    answers: list[Message] = await deployment.slack.wait_for(
        lambda: deployment.slack.final_answers(root.ts), 60, "final answer"
    )
    return answers[0]


async def test_a_handoff_objects_approved_tool_is_journaled(deployment: Deployment) -> None:
    failed = 0

    def script(request: ModelRequest) -> list[Item] | ModelError:
        nonlocal failed
        if "transfer_to_mechanic" in request.tools:
            return [tool_call("transfer_to_mechanic", {}, "call_hand")]
        if "call_restart" not in request.tool_outputs:
            return [tool_call("restart_service", {"service": "api"}, "call_restart")]
        if failed < 7:  # outlasts two deliveries' client retries
            failed += 1
            return ModelError(503, "overloaded")
        return [message("done: " + request.tool_outputs["call_restart"])]

    deployment.model.script = script
    await start(deployment)
    root = await deployment.start_run("restart the api")
    [card] = await deployment.cards(root, 1)
    assert "*mechanic* wants to run `restart_service`" in card.all_text()
    await deployment.sender.click(card, "approve", user="UBOB")

    answer = await final_answer(deployment, root)
    assert answer.text == "done: restarted api"
    assert [e["tool"] for e in await ledger(deployment)] == ["restart_service"], (
        deployment.logs_text()
    )
    assert (await events(deployment)).count(("executed", "restart_service")) == 1
    [status] = deployment.slack.status_messages(root.ts)
    assert "Nothing ran" not in status.text and "`restart_service`" in status.text, status.text


def spanish_script(request: ModelRequest) -> list[Item]:
    """`front` asks `respond_spanish`; its agent asks `get_user_name`, then answers."""
    if "respond_spanish" in request.tools:
        if "call_es" not in request.tool_outputs:
            return [tool_call("respond_spanish", {"input": "greet the user"}, "call_es")]
        return [message("front: " + request.tool_outputs["call_es"])]
    if "call_name" not in request.tool_outputs:
        return [tool_call("get_user_name", {}, "call_name")]
    return [message("¡Hola, " + request.tool_outputs["call_name"] + "!")]


async def test_a_nested_agent_tool_approved_at_both_levels_completes(
    deployment: Deployment,
) -> None:
    deployment.model.script = spanish_script
    await start(deployment)
    root = await deployment.start_run("greet me in spanish")
    [outer] = await deployment.cards(root, 1)
    assert "*front* wants to run `respond_spanish`" in outer.all_text()
    await deployment.sender.click(outer, "approve", user="UBOB")

    [_, inner] = await deployment.cards(root, 2)
    text = inner.all_text()
    assert "*spanish* wants to run `get_user_name`" in text
    assert "`get_user_name` asked by *spanish*, inside *front*" in text
    await deployment.sender.click(inner, "approve", user="UBOB")

    answer = await final_answer(deployment, root)
    assert answer.text == "front: ¡Hola, Ada!"
    assert [e["tool"] for e in await ledger(deployment)] == ["get_user_name"]
    trail = await events(deployment)
    assert trail.count(("executed", "get_user_name")) == 1
    assert trail.count(("executed", "respond_spanish")) == 1, "recorded once it returned"
    assert len([c for c in deployment.slack.cards() if c.thread_ts == root.ts]) == 2


async def test_an_agent_tool_that_returned_before_a_model_outage_is_not_asked_again(
    deployment: Deployment,
) -> None:
    """The inner call is approved, runs, and the inner agent answers; then `front`'s model
    fails (5xx) past the client's retries, and the job is retried from the state saved with
    the inner run waiting. The agent tool's recorded output is replayed, so the inner run
    saved in that state is over: it must not be asked about again (it was, on a new card
    after every approval, and the run never answered)."""
    failed = 0

    def script(request: ModelRequest) -> list[Item] | ModelError:
        nonlocal failed
        after_the_tool = "respond_spanish" in request.tools and "call_es" in request.tool_outputs
        if after_the_tool and failed < 3:  # outlasts one delivery's client retries
            failed += 1
            return ModelError(503, "overloaded")
        return spanish_script(request)

    deployment.model.script = script
    await start(deployment)
    root = await deployment.start_run("greet me in spanish")
    [outer] = await deployment.cards(root, 1)
    await deployment.sender.click(outer, "approve", user="UBOB")
    [_, inner] = await deployment.cards(root, 2)
    await deployment.sender.click(inner, "approve", user="UBOB")

    answer = await final_answer(deployment, root)
    assert answer.text == "front: ¡Hola, Ada!", deployment.logs_text()
    assert failed == 3
    assert [e["tool"] for e in await ledger(deployment)] == ["get_user_name"]
    trail = await events(deployment)
    assert trail.count(("executed", "respond_spanish")) == 1
    assert ("replayed", "respond_spanish") in trail
    assert len([c for c in deployment.slack.cards() if c.thread_ts == root.ts]) == 2


async def test_an_agent_tool_reachable_only_through_as_tool_is_journaled(
    deployment: Deployment,
) -> None:
    """The worker is killed after the inner tool ran, before the inner agent answered: the
    worker that takes the job over resumes the inner run (saved waiting, in the state it
    restores) and reuses the tool's output; the agent tool itself has no effect to lose."""
    waiting = asyncio.Event()
    kill_done = asyncio.Event()

    async def script(request: ModelRequest) -> list[Item]:
        if "translate" in request.tools:
            if "call_tr" not in request.tool_outputs:
                return [tool_call("translate", {"input": "hello"}, "call_tr")]
            return [message("front: " + request.tool_outputs["call_tr"])]
        if "call_word" not in request.tool_outputs:
            return [tool_call("look_up_word", {"word": "hello"}, "call_word")]
        if not kill_done.is_set():
            waiting.set()
            await asyncio.sleep(60)  # its worker is killed meanwhile
        return [message("means " + request.tool_outputs["call_word"])]

    deployment.model.script = script
    workers = await start(deployment, workers=2)
    root = await deployment.start_run("translate hello")
    [card] = await deployment.cards(root, 1)
    assert "`look_up_word` asked by *dictionary*, inside *front*" in card.all_text()
    await deployment.sender.click(card, "approve", user="UBOB")
    await asyncio.wait_for(waiting.wait(), 30)
    owner = await deployment.job_owner()
    assert owner in workers
    workers[owner].signal(signal.SIGKILL)
    kill_done.set()

    answer = await final_answer(deployment, root)
    assert answer.text == "front: means hello: hola", answer.text
    assert [e["tool"] for e in await ledger(deployment)] == ["look_up_word"], deployment.logs_text()
    trail = await events(deployment)
    assert trail.count(("executed", "look_up_word")) == 1
    assert ("replayed", "look_up_word") in trail


async def test_an_inner_call_cut_off_asks_before_running_again(deployment: Deployment) -> None:
    """The worker is killed inside the approved inner tool: the retry resumes the inner run,
    whose call may have run, so a person is asked about that call (not told an error the SDK
    made of the journal's refusal, not the agent tool's "may have run" that ends the run)."""

    def script(request: ModelRequest) -> list[Item]:
        if "translate" in request.tools:
            if "call_tr" not in request.tool_outputs:
                return [tool_call("translate", {"input": "hello"}, "call_tr")]
            return [message("front: " + request.tool_outputs["call_tr"])]
        if "call_word" not in request.tool_outputs:
            return [tool_call("look_up_word", {"word": "hello", "seconds": 60}, "call_word")]
        return [message("means " + request.tool_outputs["call_word"])]

    deployment.model.script = script
    workers = await start(deployment, workers=2)
    root = await deployment.start_run("translate hello")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    await wait_for_ledger(deployment, 1)  # the approved inner tool is running, slowly
    owner = await deployment.job_owner()
    assert owner in workers
    workers[owner].signal(signal.SIGKILL)

    again = await lost_card(deployment, root)
    assert "`look_up_word` may have run; its result was lost" in again.all_text()
    await deployment.sender.reject(again, user="UBOB", reason="it did run, I checked")
    answer = await final_answer(deployment, root)
    assert answer.text.startswith("front: means The call to look_up_word may have run earlier"), (
        answer.text
    )
    assert len(await ledger(deployment)) == 1


def test_the_walk_reaches_what_the_sdk_restores() -> None:
    """The same agents as the SDK's own walk (which restores saved runs), so an SDK upgrade that
    changes how agents reach each other fails here first."""
    for root in [graph_agents.front, *[agent for agent in examples.AGENTS]]:
        assert isinstance(root, Agent)
        ours = {id(agent) for agent in reachable_agents([root])}
        assert ours == {id(agent) for agent in _iter_agent_graph(root)}
    names = {agent.name for agent in reachable_agents(graph_agents.REGISTRY)}
    assert names == {"front", "mechanic", "spanish", "dictionary"}


@with_env(**GRAPH)
async def test_a_deploy_that_removed_a_nested_agents_waiting_tool_says_so(bot: Harness) -> None:
    bot.model.script = spanish_script
    root = await bot.start_run("greet me in spanish")
    [outer] = await bot.cards(root, 1)
    await bot.sender.click(outer, "approve", user="UBOB")
    [_, inner] = await bot.cards(root, 2)
    await bot.stop_workers()
    await bot.start_worker(
        "after-deploy", AGENTS="tests.support.graph_agents:REGISTRY_AFTER_DEPLOY"
    )

    await bot.sender.click(inner, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert answer.text.startswith(
        ":x: This run waits on a tool its agent no longer offers (`get_user_name` of agent spanish)"
    ), answer.text
    assert agents.EXECUTIONS == []


def test_a_card_names_every_agent_that_ran_the_asking_one_as_a_tool() -> None:
    """`outer` runs `middle` as a tool, which runs `inner` as a tool and hands off to `aside`."""
    inner = Agent[Any](name="inner")
    aside = Agent[Any](name="aside")
    middle = Agent[Any](name="middle", tools=[inner.as_tool("ask_inner", "")], handoffs=[aside])
    outer = Agent[Any](name="outer", tools=[middle.as_tool("ask_middle", "")])
    assert callers(outer, outer) == ()
    assert callers(outer, middle) == ("outer",)
    assert callers(outer, inner) == ("outer", "middle")
    assert callers(outer, aside) == ("outer",), "a hand-off inside a tool call stays inside it"
    assert callers(middle, aside) == (), "the run's own hand-off"
    assert callers(graph_agents.front, graph_agents.spanish) == ("front",)
    assert callers(graph_agents.front, graph_agents.mechanic) == ()


@with_env(**GRAPH)
async def test_an_agent_tool_call_has_no_edit_its_inner_tool_is_carded_as_any(
    bot: Harness,
) -> None:
    """An edit would be carried by one round only, and an agent tool's run may outlive it. The
    inner call's card is drawn as any call's: `get_user_name` takes no arguments, so it says so
    and offers nothing to edit."""
    bot.model.script = spanish_script
    root = await bot.start_run("greet me in spanish")
    [outer] = await bot.cards(root, 1)
    assert edit_button(outer) is None
    assert NO_ARGUMENTS not in json.dumps(outer.blocks), "the agent tool's input is shown"
    await bot.sender.click(outer, "approve", user="UBOB")
    [_, inner] = await bot.cards(root, 2)
    assert NO_ARGUMENTS in json.dumps(inner.blocks)
    assert edit_button(inner) is None


@with_env(**GRAPH)
async def test_a_rejected_inner_call_is_told_to_the_inner_agent(bot: Harness) -> None:
    bot.model.script = spanish_script
    root = await bot.start_run("greet me in spanish")
    [outer] = await bot.cards(root, 1)
    await bot.sender.click(outer, "approve", user="UBOB")
    [_, inner] = await bot.cards(root, 2)
    await bot.sender.reject(inner, user="UCAROL", reason="no names today")

    answer = await bot.final_answer(root)
    assert "was rejected by ucarol (UCAROL). Reason: no names today" in answer.text
    assert agents.EXECUTIONS == []
    assert len([c for c in bot.slack.cards() if c.thread_ts == root.ts]) == 2
