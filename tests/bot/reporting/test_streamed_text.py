"""The model's text streams in its stretch's message as it is written, appended at most about
once a second; a model call that breaks off mid-answer is asked again and its text replaced,
not repeated; a text past what a stream holds goes on in an ordinary message; the answer is
posted whole at the end, as always."""

from __future__ import annotations

import asyncio
import itertools
import logging
import signal

import pytest

from runtime.record import layout as rr
from tests.conftest import with_env
from tests.runtime.journal.test_model_turns import failing_after
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, Reply, StreamCut, message, tool_call
from tests.support.fake_slack import AGENT_ERRORS, ONE_CALL_ERRORS, Message
from tests.support.harness import Harness
from tests.test_faults import only_run_id

ANSWER = (
    "Nothing needed a person here. The three users are listed in the directory, and none of "
    "them has logged in this month, so nothing was changed and nobody was told."
)


def streamed(bot: Harness, root: Message) -> list[Message]:
    return [m for m in bot.slack.thread(root.channel, root.ts) if m.streamed]


def text_appends(bot: Harness) -> list[float]:
    """When each append carrying the model's text arrived."""
    return [
        call.at
        for call in bot.slack.calls_to("chat.appendStream")
        if any(c.get("type") == "markdown_text" for c in call.args.get("chunks") or [])
    ]


@with_env(STREAMING="on")
async def test_the_models_text_streams_as_it_is_written(bot: Harness) -> None:
    bot.model.script = lambda request: [message(ANSWER)]
    bot.model.pace = 0.12  # 8 characters an event: the answer takes about 2.5 s to write
    root = await bot.start_run("who has not logged in?")
    [stream] = await bot.slack.wait_for(lambda: streamed(bot, root), what="a streamed message")
    partial = await bot.slack.wait_for(
        lambda: stream.text if stream.streaming and 0 < len(stream.text) < len(ANSWER) else "",
        what="part of the answer shown while it is written",
    )
    assert ANSWER.startswith(partial)

    assert (await bot.final_answer(root)).text == ANSWER, "posted whole, as always"
    await bot.slack.wait_for(lambda: not stream.streaming, what="the stream stopped")
    assert stream.text == ANSWER
    assert ":no_entry_sign: Nothing ran" in stream.all_text()
    appends = text_appends(bot)
    assert len(appends) >= 1
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(appends)), appends
    assert [r.body.get("stream") for r in bot.model.requests] == [True]
    bot.slack.assert_nothing_refused()


@with_env(STREAMING="on", MODEL_RETRIES="2")
async def test_an_answer_broken_off_is_asked_again_and_its_text_replaced(bot: Harness) -> None:
    def script(request: ModelRequest) -> Reply:
        if len(bot.model.requests) == 1:
            return StreamCut([message("First try, which breaks off " + "x" * 60)], after=64)
        return [message("Second try, whole.")]

    bot.model.script = script
    bot.model.pace = 0.3  # the first try's words reach Slack before it breaks off
    root = await bot.start_run("who has not logged in?")
    [stream] = await bot.slack.wait_for(lambda: streamed(bot, root), what="a streamed message")
    await bot.slack.wait_for(lambda: "First try" in stream.text, what="the first try shown")

    assert (await bot.final_answer(root)).text == "Second try, whole."
    await bot.slack.wait_for(
        lambda: ":no_entry_sign: Nothing ran" in stream.all_text(), what="the stretch's ending"
    )
    assert "First try" not in stream.all_text(), "the broken-off text is replaced"
    assert stream.all_text().count("Second try, whole.") == 1
    assert len(bot.model.requests) == 2
    [answer] = bot.slack.final_answers(root.ts)
    assert answer.text == "Second try, whole."


@with_env(STREAMING="on")
@pytest.mark.parametrize("length", [12_500])
async def test_a_text_past_what_a_stream_holds_goes_on_in_an_ordinary_message(
    bot: Harness, length: int
) -> None:
    long = ("word " * (length // 5)).strip() + " the end."
    bot.model.script = lambda request: [message(long)]
    bot.model.pace = 0.002  # written in about 3 s: a stream starts, then outgrows Slack's limit
    root = await bot.start_run("write a lot")
    [stream] = await bot.slack.wait_for(lambda: streamed(bot, root), what="a streamed message")
    assert (await bot.final_answer(root)).text == long, "posted whole, as always"
    await bot.slack.wait_for(
        lambda: ":no_entry_sign: Nothing ran" in stream.all_text(), what="the status drawn on it"
    )
    assert not stream.streaming
    [said] = [b["text"] for b in stream.blocks if b["type"] == "markdown"]
    assert said.startswith("…") and said.endswith("the end.") and len(said) <= 11_000
    assert [c.method for c in bot.slack.calls if c.method.startswith("chat.")].count(
        "chat.startStream"
    ) == 1, "one stream for the stretch, then an ordinary message"


@with_env(STREAMING="on")
@pytest.mark.parametrize("error", AGENT_ERRORS)
async def test_an_append_refused_mid_answer_loses_no_word(
    bot: Harness, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack refuses an append while the model writes: the message goes on as an ordinary one
    holding the text so far and the status; the run, or the process, stops streaming."""
    bot.slack.refuse("chat.appendStream", error)
    caplog.set_level(logging.INFO, logger="bot.reporting")
    bot.model.script = lambda request: [message(ANSWER)]
    bot.model.pace = 0.12
    root = await bot.start_run("who has not logged in?")
    assert (await bot.final_answer(root)).text == ANSWER
    [stream] = streamed(bot, root)
    await bot.slack.wait_for(
        lambda: ":no_entry_sign: Nothing ran" in stream.all_text(), what="the status drawn on it"
    )
    assert not stream.streaming
    [said] = [b["text"] for b in stream.blocks if b["type"] == "markdown"]
    assert said == ANSWER, "every word of the stretch, drawn with its status"
    lines = [r.getMessage() for r in caplog.records if "streaming off for this" in r.getMessage()]
    one_run = error in ONE_CALL_ERRORS
    assert len(lines) == 1 and error in lines[0] and "chat.appendStream" in lines[0], lines
    assert ("for this run" if one_run else "for this process") in lines[0]


async def test_a_worker_killed_while_the_model_writes(deployment: Deployment) -> None:
    """The worker streaming a model's answer is SIGKILLed mid-answer: the other one takes the
    run over, stops the stream left open with a line saying so, asks the model again and
    streams the whole answer in its own message; the answer is posted once."""
    env = {"STREAMING": "on"}
    await deployment.web(**env)
    workers = {name: deployment.worker(name, **env) for name in ("worker.1", "worker.2")}
    deployment.model.script = lambda request: [message(ANSWER)]
    deployment.model.pace = 0.15  # about 3 s of writing
    slack = deployment.slack
    root = await deployment.start_run("who has not logged in?")
    [first] = await slack.wait_for(
        lambda: [m for m in slack.thread(root.channel, root.ts) if m.streamed and m.text],
        20,
        "the answer being written",
    )
    await stream_recorded(deployment, first)
    owner = await deployment.job_owner()
    assert owner in workers
    workers[owner].signal(signal.SIGKILL)

    [answer] = await deployment.final_answers(root)
    assert answer.text == ANSWER
    assert not first.streaming and "moved on to another worker" in first.text
    assert ANSWER.startswith(first.text.split("\n\n_This run moved on")[0])
    [second] = [m for m in slack.thread(root.channel, root.ts) if m.streamed and m is not first]
    await slack.wait_for(lambda: not second.streaming, 20, "the second stream stopped")
    assert second.text == ANSWER
    assert len(deployment.model.requests) == 2, "asked again: an answer is not journaled"
    slack.assert_nothing_refused()


async def stream_recorded(deployment: Deployment, stream: Message) -> None:
    """Wait until the run's record names `stream` (a worker killed between starting a stream
    and recording it leaves one nobody knows of, which Slack ends after five minutes)."""
    key = deployment.keys.run(await only_run_id(deployment))
    for _ in range(500):
        if await deployment.redis.hget(key, rr.STATUS_MESSAGE) == f"stream:{stream.ts}".encode():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the stream's id never recorded with the run")


@with_env(STREAMING="on")
async def test_a_replayed_turn_shows_its_text(bot: Harness) -> None:
    """A retried job replays the turn its first delivery journaled (the model is not asked it
    again): its text is shown as it was, once."""

    def calls(outputs: dict[str, str]) -> list[Item] | None:
        return (
            None if outputs else [message("Listing the users first."), tool_call("list_users", {})]
        )

    bot.model.script = failing_after(calls)  # then 503s past the delivery's tries: a retry
    root = await bot.start_run("who is there?")
    assert (await bot.final_answer(root, timeout=30)).text.startswith("done: ")
    assert len(agents.EXECUTIONS) == 1
    first_turns = [r for r in bot.model.requests if not r.tool_outputs]
    assert len(first_turns) == 1, "the turn was replayed, not asked again"
    shown = " ".join(m.all_text() for m in streamed(bot, root))
    assert shown.count("Listing the users first.") == 1, shown
