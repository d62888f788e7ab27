"""Talking to Slack politely: rate limits are waited out, the status message is not spammed."""

from __future__ import annotations

from tests.fake_openai import ModelRequest, message, tool_call
from tests.harness import Harness
from tests.model_scripts import delete_then_answer


async def test_a_rate_limited_card_is_retried_after_retry_after(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    bot.slack.fail_next(
        "chat.postMessage",
        429,
        {"ok": False, "error": "ratelimited"},
        when=lambda args: "blocks" in args,
        **{"Retry-After": "1"},
    )
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1, timeout=15)
    limited, retried = [c for c in bot.slack.calls_to("chat.postMessage") if "blocks" in c.args]
    assert limited.args == retried.args, "the same card, posted again"
    assert retried.at - limited.at >= 0.9, "after waiting for Retry-After"
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


async def test_a_slack_server_error_is_retried(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    bot.slack.fail_next("chat.postMessage", 503, {"ok": False, "error": "service_unavailable"})
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1, timeout=15)
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


async def test_the_status_message_is_updated_in_place_at_a_modest_rate(bot: Harness) -> None:
    def many_quick_tools(request: ModelRequest) -> list[dict[str, object]]:
        done = len(request.tool_outputs)
        if done < 30:  # five at a time: within the default limit of 10 turns
            return [tool_call("list_users", {}, f"c{done + n}") for n in range(5)]
        return [message("listed 30 times")]

    bot.model.script = many_quick_tools
    root = await bot.start_run("list a lot")
    assert (await bot.final_answer(root)).text == "listed 30 times"
    statuses = [m for m in bot.slack.thread(root.channel, root.ts) if m.text.startswith(":")]
    assert len(statuses) == 1, "one status message, edited in place"
    [status] = statuses
    assert status.text.startswith(":white_check_mark: Done")
    assert status.text.count("called `list_users`") == 12, "the last dozen steps"
    updates = [c for c in bot.slack.calls_to("chat.update") if c.args.get("ts") == status.ts]
    span = updates[-1].at - bot.slack.calls_to("chat.postMessage")[0].at if updates else 0
    assert len(updates) <= 2 + span / 1.5, f"{len(updates)} updates in {span:.1f}s"
