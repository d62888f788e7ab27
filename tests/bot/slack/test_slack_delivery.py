"""Talking to Slack politely: rate limits are waited out, the status message is not spammed."""

from __future__ import annotations

import json

from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


async def test_a_rate_limited_card_is_retried_after_retry_after(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    bot.slack.fail_next(
        "chat.postMessage",
        429,
        {"ok": False, "error": "ratelimited"},
        when=lambda args: "wants to run" in str(args.get("text", "")),
        headers={"Retry-After": "1"},
    )
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1, timeout=15)
    posts = bot.slack.calls_to("chat.postMessage")
    limited, retried = [c for c in posts if "wants to run" in str(c.args.get("text", ""))]
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
    statuses = bot.slack.status_messages(root.ts)
    assert len(statuses) == 1, "one status message, edited in place"
    [status] = statuses
    assert status.text.startswith(":white_check_mark: Done")
    assert status.text.endswith("• called `list_users` \N{MULTIPLICATION SIGN}30"), status.text
    updates = [c for c in bot.slack.calls_to("chat.update") if c.args.get("ts") == status.ts]
    span = updates[-1].at - bot.slack.calls_to("chat.postMessage")[0].at if updates else 0
    assert len(updates) <= 2 + span / 1.5, f"{len(updates)} updates in {span:.1f}s"


async def test_messages_arrive_in_order_through_429s_and_5xx(bot: Harness) -> None:
    def two_rounds(request: ModelRequest) -> list[dict[str, object]]:
        outputs = request.tool_outputs
        if not outputs:
            return [tool_call("delete_user", {"user_id": "u-100"}, "c1")]
        if len(outputs) == 1:
            return [tool_call("restart_service", {"service": "api"}, "c2")]
        return [message("both done")]

    bot.model.script = two_rounds
    for _ in range(2):
        bot.slack.fail_next(
            "chat.postMessage",
            429,
            {"ok": False, "error": "ratelimited"},
            headers={"Retry-After": "1"},
        )
    bot.slack.fail_next(
        "chat.postMessage",
        503,
        {"ok": False, "error": "service_unavailable"},
        when=lambda args: "restart_service" in json.dumps(args),
    )
    root = await bot.start_run("delete then restart")
    [first] = await bot.cards(root, 1, timeout=20)
    await bot.sender.click(first, "approve", user="UBOB")
    [_, second] = await bot.cards(root, 2, timeout=20)
    bot.slack.fail_next("chat.postMessage", 500, {"ok": False, "error": "internal_error"})
    await bot.sender.click(second, "approve", user="UBOB")
    answer = await bot.final_answer(root, timeout=20)

    thread = [m.text for m in bot.slack.thread(root.channel, root.ts)]
    assert [t.split(" ")[0] for t in thread] == [
        ":white_check_mark:",
        ":white_check_mark:",
        ":white_check_mark:",
        "both",
    ], thread
    assert "delete_user" in thread[1] and "restart_service" in thread[2]
    assert answer.text == "both done"


async def test_posts_to_a_response_url_share_the_process_s_connections(bot: Harness) -> None:
    """Each `response_url` post went through a session (and a connection) of its own."""
    for n in range(4):
        bot.slack.fail_next("chat.postMessage", 200, {"ok": False, "error": "not_in_channel"})
        told = len(bot.slack.responses)
        status, _ = await bot.sender.command(f"delete u-10{n}", channel="CNOTIN")
        assert status == 200
        await bot.slack.wait_for(lambda: len(bot.slack.responses) > told, what="told")  # noqa: B023
        assert "can't post in <#CNOTIN>" in bot.slack.responses[-1]["text"]
    assert len(bot.slack.response_peers) == 4
    assert len(set(bot.slack.response_peers)) < 4, "connections kept and reused"
