"""`/agent status`: what runs in this channel, what each waits for, and since when."""

from __future__ import annotations

import asyncio

import pytest

from bot.listeners.commands import parse_command_text
from tests.support.fake_openai import Item, ModelRequest
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


@pytest.mark.parametrize(
    ("text", "kind", "task"),
    [
        ("status", "status", ""),
        ("STATUS r0123456789abcdef", "status", "r0123456789abcdef"),
        ("status of the api", "usage", "of the api"),
    ],
)
def test_status_is_a_command_even_before_something_else(text: str, kind: str, task: str) -> None:
    parsed = parse_command_text(text, ["ops"])
    assert (parsed.kind, parsed.task) == (kind, task)


def run_id_of(card: Message) -> str:
    return str(card.actions()[0]["value"]).split(":")[0]


async def status_text(bot: Harness, text: str = "status", **who: str) -> str:
    status, body = await bot.sender.command(text, **who)
    assert status == 200
    assert body["response_type"] == "ephemeral", "answered privately"
    return str(body["text"])


async def test_status_lists_a_waiting_run_with_its_state_age_thread_and_id(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    run_id = run_id_of(card)

    text = await status_text(bot, user="UBOB")
    thread_link = (
        f"<https://console.localhost/archives/CGENERAL/p{root.ts.replace('.', '')}|thread>"
    )
    assert text == (
        "*Live runs in this channel* (1)\n"
        "• *ops* for <@UALICE>: delete u-100 · waiting for 1 approval · under a minute · "
        f"{thread_link} · `{run_id}`"
    )

    # Three minutes later (by the index's clock), it says so.
    started = await bot.redis.zscore(bot.keys.live_runs, run_id)
    assert started is not None
    await bot.redis.zadd(bot.keys.live_runs, {run_id: started - 185})
    assert "waiting for 1 approval · 3 min ·" in await status_text(bot, f"status {run_id}")

    elsewhere = await status_text(bot, channel="COTHER", user="UBOB")
    assert elsewhere.startswith("No runs are live in this channel.")
    assert "No live run" in await status_text(
        bot, f"status {run_id}", channel="COTHER", user="UBOB"
    )
    assert run_id in await status_text(bot, f"status {run_id}", channel="COTHER", user="UALICE"), (
        "the requester finds their own run from anywhere"
    )

    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    for _ in range(100):  # settled once the run's record is closed
        if await bot.redis.exists(bot.keys.tombstone(run_id)):
            break
        await asyncio.sleep(0.05)
    assert (await status_text(bot)).startswith("No runs are live in this channel.")
    assert await bot.redis.zcard(bot.keys.live_runs) == 0


async def test_a_run_the_model_is_still_thinking_about_is_working(bot: Harness) -> None:
    thinking = asyncio.Event()
    answer = asyncio.Event()

    async def slow_model(request: ModelRequest) -> list[Item]:
        thinking.set()
        await answer.wait()
        return delete_then_answer(request)

    bot.model.script = slow_model
    root = await bot.start_run("delete u-100")
    await asyncio.wait_for(thinking.wait(), 10)
    assert "for <@UALICE>: delete u-100 · working · " in await status_text(bot)

    answer.set()
    await bot.cards(root, 1)
    assert "· waiting for 1 approval ·" in await status_text(bot)


async def test_a_stopped_run_leaves_the_list(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    status, body = await bot.sender.command(f"stop {run_id_of(card)}", user="UALICE")
    assert status == 200 and body["text"].startswith("Stopped"), body
    assert (await status_text(bot)).startswith("No runs are live in this channel.")
