"""Replies racing in one thread, on two real web processes: exactly one starts a run, the thread
is told once that it is still working, and nothing else starts."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from bot.words import threads as words
from runtime.db.local import free_port
from tests.conftest import on_cluster_too
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import SIGNING_SECRET
from tests.support.processes import Process, procfile, wait_until_healthy
from tests.support.slack_requests import SlackSender

REPLIES = 8
ROUNDS = 3


def hello_then_delete(request: ModelRequest) -> list[Item]:
    """`hello` is answered in words; a reply asks for delete_user, whose card then waits."""
    words_in = [str(i.get("content")) for i in request.input if i.get("role") == "user"]
    if request.tool_outputs:
        return [message("done")]
    if words_in and "delete" in words_in[-1]:
        return [tool_call("delete_user", {"user_id": "u-100"}, "call_del")]
    return [message("hello back")]


def reply(root: Message, text: str, user: str, n: int) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": root.channel,
        "user": user,
        "text": text,
        "ts": f"{time.time():.6f}{n}",  # each reply a message of its own
        "thread_ts": root.ts,
        "channel_type": "channel",
    }


async def second_web(deployment: Deployment) -> SlackSender:
    port = free_port()
    env = deployment.env(PORT=str(port))
    process = Process("web.2", procfile()["web"], env, deployment.logs)
    deployment.processes.append(process)
    await wait_until_healthy(f"http://127.0.0.1:{port}/healthz", process)
    url = f"http://127.0.0.1:{port}/slack/events"
    return SlackSender(deployment.sender.session, url, SIGNING_SECRET, deployment.slack)


@on_cluster_too
async def test_of_replies_racing_in_a_thread_exactly_one_starts_a_run(
    deployment: Deployment,
) -> None:
    deployment.model.script = hello_then_delete
    await deployment.web()
    other = await second_web(deployment)
    deployment.worker("worker.1")
    senders = [deployment.sender, other]
    for round_ in range(ROUNDS):
        root = await deployment.start_run(f"hello {round_}")
        await deployment.final_answers(root)
        replies = [
            reply(root, f"now delete u-10{n}", f"UR{round_}{n}", n + 10 * round_)
            for n in range(REPLIES)
        ]
        answered = await asyncio.gather(
            *(senders[n % 2].event(event) for n, event in enumerate(replies))
        )
        assert [status for status, _ in answered] == [200] * REPLIES

        # Each web answers before it acknowledges: what it said is in the thread by now, and
        # the thread is told once, however many replies lost the race.
        thread = deployment.slack.thread(root.channel, root.ts)
        told = [m for m in thread if m.text == words.STILL_WORKING]
        assert len(told) == 1, deployment.logs_text()
        await deployment.cards(root, 1)
        started = [
            details
            for entry in await deployment.audit_entries()
            if entry[b"event"] == b"started"
            and (details := json.loads(entry[b"details"])).get("task", "").startswith("now delete")
            and details.get("requester") in {e["user"] for e in replies}
        ]
        assert len(started) == 1, started
        await deployment.jobs_done()  # a second run's card would be drawn by now
        cards = [c for c in deployment.slack.cards() if c.thread_ts == root.ts]
        assert len(cards) == 1, "one run asks, once"
