"""`/agent` as people type it: help, picking an agent, mistakes, and a queue that is down."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from bot.console.slack_payloads import ephemeral_click
from bot.listeners.commands import COMMANDS, parse_command_text
from bot.words import commands as command_words
from runtime.db.local import free_port
from tests.support.fake_openai import ModelRequest, message
from tests.support.fake_slack import Message
from tests.support.harness import Harness

AGENTS = ["ops", "helper"]


@pytest.mark.parametrize(
    ("text", "kind", "agent", "task"),
    [
        ("restart the api", "task", "ops", "restart the api"),
        ("helper: restart the api", "task", "helper", "restart the api"),
        ("  helper :  restart  ", "task", "helper", "restart"),
        ("billing: refund o-1", "unknown_agent", "billing", ""),
        (
            "see https://status.example.com: is it down?",
            "task",
            "ops",
            "see https://status.example.com: is it down?",
        ),
        ("https://example.com: check it", "task", "ops", "https://example.com: check it"),
        ("", "help", "", ""),
        ("help", "help", "", ""),
        ("HELP", "help", "", ""),
        ("ops:", "empty_task", "ops", ""),
        ("helper:   ", "empty_task", "helper", ""),
        ("billing:", "unknown_agent", "billing", ""),
        ("audit", "audit", "", ""),
        ("audit 100", "audit", "", "100"),
        ("audit r0123456789abcdef", "audit", "", "r0123456789abcdef"),
        ("audit 0", "usage", "audit", "0"),
        ("audit 100000", "usage", "audit", "100000"),
        ("audit banana", "usage", "audit", "banana"),
        ("audit the logs", "usage", "audit", "the logs"),
        ("stats", "stats", "", ""),
        ("stats 30", "stats", "", "30"),
        ("stats 365", "stats", "", "365"),
        ("stats 366", "usage", "stats", "366"),
        ("stats 0", "usage", "stats", "0"),
        ("stats x", "usage", "stats", "x"),
        ("stats of last week", "usage", "stats", "of last week"),
        ("stop r-nonexistent", "usage", "stop", "r-nonexistent"),
        ("stop", "did_you_mean", "stop", "stop"),
        ("cancel", "did_you_mean", "stop", "cancel"),
        ("stp", "did_you_mean", "stop", "stp"),
        ("stauts", "did_you_mean", "status", "stauts"),
        ("hlep", "did_you_mean", "help", "hlep"),
        ("grant", "did_you_mean", "grants", "grant"),
        ("Audti", "did_you_mean", "audit", "Audti"),
        ("cancle", "did_you_mean", "stop", "cancle"),
        ("deploy", "task", "ops", "deploy"),
        ("to", "task", "ops", "to"),
        ("stp the api", "task", "ops", "stp the api"),
        ("Stop: the nginx service", "usage", "stop", "the nginx service"),
        ("cancel r0123456789abcdef", "stop", "", "r0123456789abcdef"),
        ("grants", "grants", "", ""),
        ("grants extra", "usage", "grants", "extra"),
        ("status of the api", "usage", "status", "of the api"),
        ("help me", "help", "", ""),
        ("ops: stop the nginx service", "task", "ops", "stop the nginx service"),
        ("stopwatch the build", "task", "ops", "stopwatch the build"),
    ],
)
def test_parse_command_text(text: str, kind: str, agent: str, task: str) -> None:
    parsed = parse_command_text(text, AGENTS)
    assert (parsed.kind, parsed.agent, parsed.task) == (kind, agent, task)


async def test_help_lists_agents_and_usage(bot: Harness) -> None:
    status, body = await bot.sender.command("help")
    assert status == 200
    assert body["response_type"] == "ephemeral"
    assert "`/agent <agent>: <task>`" in body["text"]
    assert "Agents: `ops`, `helper`" in body["text"]
    assert "`/agent ops: stop the nginx service`" in body["text"]
    assert bot.slack.roots() == []


def test_help_lists_every_command_the_parser_knows_one_line_each() -> None:
    """Generated from the parser's table: a command the parser knows is in the help."""
    text = command_words.command_help("/agent", AGENTS)
    for word, words in COMMANDS.items():
        lines = [line for line in text.splitlines() if line.startswith(f"• `/agent {words.name}")]
        assert len(lines) == 1, word
        assert parse_command_text(f"{words.name} {words.arguments}", AGENTS).kind in (
            words.name,
            "usage",
        )
    assert "• `/agent stop <run id>`" in text
    assert "`cancel`" in text


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("stop r-nonexistent", "`/agent stop` takes a run id, not `r-nonexistent`"),
        ("grants extra", "`/agent grants` takes nothing after it, not `extra`"),
        ("status of the api", "`/agent status` takes nothing or a run id, not `of the api`"),
        ("audit 100000", "`/agent audit` takes how many events to show (1 to 100)"),
        ("billing:", "There is no agent called `billing`."),
        ("helper:", "Say what *helper* should do: `/agent helper: <task>`."),
    ],
)
async def test_a_mistyped_command_is_answered_privately_and_starts_nothing(
    bot: Harness, text: str, told: str
) -> None:
    status, body = await bot.sender.command(text)
    assert status == 200 and body["response_type"] == "ephemeral"
    assert body["text"].startswith(told), body["text"]
    if " " in text:
        assert f"`/agent ops: {text}`" in body["text"], "how to make it a task instead"
    assert await bot.redis.xlen(bot.keys.jobs) == 0, "not a run"


async def test_an_unknown_agent_is_refused_with_the_names(bot: Harness) -> None:
    status, body = await bot.sender.command("billing: refund o-1")
    assert status == 200
    assert "There is no agent called `billing`. Agents: `ops`, `helper`." in body["text"]
    assert "`/agent ops: billing: ...`" in body["text"]
    assert await bot.redis.xlen(bot.keys.jobs) == 0


async def test_a_named_agent_runs_the_task_and_acks_fast(bot: Harness) -> None:
    def answer(request: ModelRequest) -> list[dict[str, object]]:
        return [message(f"helper got: {request.task}")]

    bot.model.script = answer
    started = time.perf_counter()
    status, body = await bot.sender.command("helper: restart the api")
    elapsed = time.perf_counter() - started
    assert status == 200
    assert body == {
        "response_type": "ephemeral",
        "text": "Starting *helper* on your task… I'll post in a thread in this channel.",
    }
    assert elapsed < 3
    root = await bot.slack.wait_for(lambda: bot.slack.roots(), what="root")
    assert root[0].text == "<@UALICE> asked *helper*: restart the api"
    assert (await bot.final_answer(root[0])).text == "helper got: restart the api"


async def test_a_task_cannot_ping_the_channel(bot: Harness) -> None:
    bot.model.script = lambda request: [message("<!channel> done <@U123>")]
    await bot.sender.command("tell <!channel> & <@UBOSS>")
    [root] = await bot.slack.wait_for(lambda: bot.slack.roots(), what="root")
    assert root.text == "<@UALICE> asked *ops*: tell &lt;!channel&gt; &amp; &lt;@UBOSS&gt;"
    answer = await bot.final_answer(root)
    assert answer.text == "&lt;!channel&gt; done &lt;@U123&gt;"


@pytest.fixture
async def bot_without_redis(prefix: str) -> AsyncIterator[Harness]:
    """The web process up, its Redis not answering (nothing listens on the port)."""
    harness = Harness(redis_url=f"redis://127.0.0.1:{free_port()}/0", prefix=prefix)
    await harness.start(worker=False)
    try:
        yield harness
    finally:
        await harness.stop()


async def test_with_redis_down_the_command_says_try_again_within_slacks_limit(
    bot_without_redis: Harness,
) -> None:
    started = time.perf_counter()
    status, body = await bot_without_redis.sender.command("restart the api")
    assert time.perf_counter() - started < 3
    assert status == 200
    assert "can't reach its job queue right now, so nothing was started" in body["text"]


async def test_with_redis_down_a_click_says_try_again_and_keeps_the_buttons(
    bot_without_redis: Harness,
) -> None:
    card = Message("CGENERAL", "1700000000.000200", "card", [], "1700000000.000100")
    value = "r0123456789abcdef:a0123456789"
    started = time.perf_counter()
    status, _ = await bot_without_redis.sender.click(card, "approve", user="UBOB", value=value)
    assert time.perf_counter() - started < 3
    assert status == 200
    slack = bot_without_redis.slack
    note = await slack.wait_for(lambda: slack.ephemerals, what="ephemeral")
    assert "your decision was not recorded" in note[0]["text"]
    assert "The buttons still work" in note[0]["text"]
    assert slack.calls_to("chat.update") == []


@pytest.mark.parametrize(
    "what", ["0", "banana", "-5", "r123"], ids=["zero", "word", "negative", "short-id"]
)
async def test_audit_with_something_it_cannot_show_says_what_it_takes(
    bot: Harness, what: str
) -> None:
    status, body = await bot.sender.command(f"audit {what}")
    assert status == 200
    assert body["text"].startswith(
        f"`/agent audit` takes how many events to show (1 to 100) or a run id, not `{what}`"
    )
    assert f"`/agent ops: audit {what}`" in body["text"], "how to make it a task instead"
    assert await bot.redis.xlen(bot.keys.jobs) == 0, "not a run"


async def test_a_long_task_is_shortened_in_the_threads_first_message(bot: Harness) -> None:
    task = "restart " + "the api and " * 200 + "the end"
    bot.model.script = lambda request: [message(f"{len(request.task)} characters")]
    root = await bot.start_run(task)
    assert root.text.startswith("<@UALICE> asked *ops*: restart the api and")
    assert root.text.endswith("…")
    assert len(root.text) < 400
    assert (await bot.final_answer(root)).text == f"{len(task)} characters", "the agent gets it all"


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("stp", "`/agent stop <run id>`"),
        ("stauts", "`/agent status`"),
        ("hlep", "`/agent help`"),
        ("grant", "`/agent grants`"),
        ("stop", "`/agent stop <run id>`"),
    ],
)
async def test_a_mistyped_command_word_asks_what_was_meant_and_starts_nothing(
    bot: Harness, typed: str, meant: str
) -> None:
    status, body = await bot.sender.command(typed)
    assert status == 200 and body["response_type"] == "ephemeral"
    assert body["text"].startswith(f"Did you mean {meant}?"), body["text"]
    assert f"If “{typed}” is a task for *ops*, press *Run as a task*." in body["text"]
    [button] = [e for b in body["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert button["text"]["text"] == "Run as a task"
    assert await bot.redis.xlen(bot.keys.jobs) == 0, "not a run"
    assert bot.slack.roots() == []


async def test_stop_without_a_run_id_says_where_the_run_id_is_and_the_status_shows_it(
    bot: Harness,
) -> None:
    bot.model.script = lambda request: [message("done")]
    root = await bot.start_run("restart the api")
    await bot.final_answer(root)
    [status] = bot.slack.status_messages(root.ts)
    foot = status.blocks[-1]
    assert foot["type"] == "context"
    shown = foot["elements"][0]["text"]
    assert shown.startswith("Run id `r") and len(shown) == len("Run id `r0123456789abcdef`")

    _, body = await bot.sender.command("stop")
    assert "The run id is at the foot of the run's status message" in body["text"]
    run = shown.removeprefix("Run id `").removesuffix("`")
    _, audit = await bot.sender.command(f"audit {run}")
    assert f"run `{run}`" in audit["text"], "the run id shown is the run's"


async def test_run_as_task_starts_the_run_once_as_the_command_would(bot: Harness) -> None:
    bot.model.script = lambda request: [message(f"ops got: {request.task}")]
    _, body = await bot.sender.command("stp", trigger_id="1234.5678.trigger")
    [button] = [e for b in body["blocks"] if b["type"] == "actions" for e in b["elements"]]

    for click in ("t-first", "t-second"):  # a double click
        payload = ephemeral_click(
            channel="CGENERAL",
            message_ts="1700000000.000900",
            action={**button, "block_id": "did_you_mean"},
            user=bot.sender.user("UALICE"),
            response_url=bot.slack.response_url("UALICE"),
            trigger_id=click,
        )
        status, _ = await bot.sender.interact(payload)
        assert status == 200

    [root] = await bot.slack.wait_for(lambda: bot.slack.roots(), what="root")
    assert root.text == "<@UALICE> asked *ops*: stp"
    assert (await bot.final_answer(root)).text == "ops got: stp"
    answers = await bot.slack.wait_for(
        lambda: [r for r in bot.slack.responses if r.get("replace_original")], what="answer"
    )
    assert answers[0]["text"].startswith("Starting *ops* on your task…")
    trail = await bot.audit_until("finished")
    assert [e["event"] for e in trail].count("started") == 1, "two clicks, one run"
    assert len(bot.slack.roots()) == 1
