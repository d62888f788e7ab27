"""Home tabs published by several web processes: each affected tab once per change, at one
rate for all of them that Slack's 429 pauses, on real processes."""

from __future__ import annotations

import asyncio
import time

from runtime.db.local import free_port
from tests.support.deployment import Deployment
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import Process, procfile, wait_until_healthy
from tests.support.slack_requests import SlackSender
from tests.support.time_passing import lapse_debounce, refill_publish_rate


async def second_web(deployment: Deployment, **env: str) -> SlackSender:
    """One more web process on the same Redis; the sender that signs requests into it."""
    port = free_port()
    process = Process(
        "web.2", procfile()["web"], deployment.env(PORT=str(port), **env), deployment.logs
    )
    deployment.processes.append(process)
    await wait_until_healthy(f"http://127.0.0.1:{port}/healthz", process)
    return SlackSender(
        deployment.session,
        f"http://127.0.0.1:{port}/slack/events",
        deployment.sender.secret,
        deployment.slack,
    )


def published_to(deployment: Deployment, user: str, since: float = 0.0) -> list[float]:
    return [
        c.at
        for c in deployment.slack.calls_to("views.publish")
        if c.args.get("user_id") == user and c.at >= since
    ]


async def open_through(sender: SlackSender, deployment: Deployment, user: str) -> None:
    before = len(published_to(deployment, user))
    event = {"type": "app_home_opened", "user": user, "channel": f"D{user}", "tab": "home"}
    status, _ = await sender.event(event)
    assert status == 200
    await deployment.slack.wait_for(
        lambda: len(published_to(deployment, user)) > before, what=f"{user}'s tab"
    )


async def test_two_web_processes_publish_each_affected_tab_once(deployment: Deployment) -> None:
    people = [f"UM{n}" for n in range(6)]
    deployment.slack.groups["S0SRE"] = {"handle": "sre", "users": people}
    env = {"APPROVERS": "S0SRE"}
    deployment.model.script = delete_then_answer
    await deployment.web(**env)
    senders = [deployment.sender, await second_web(deployment, **env)]
    deployment.worker("worker.1", **env)
    for number, person in enumerate(people):
        await open_through(senders[number % 2], deployment, person)
    await lapse_debounce(deployment.redis, deployment.keys, people)  # the openings' debounce
    changed = time.time()
    root = await deployment.start_run("delete u-100")
    await deployment.cards(root, 1)
    await deployment.slack.wait_for(
        lambda: all(published_to(deployment, p, changed) for p in people), what="every tab"
    )
    # A second publish by the other process would come once the first's debounce lapsed.
    await asyncio.sleep(3.0)
    assert {p: len(published_to(deployment, p, changed)) for p in people} == dict.fromkeys(
        people, 1
    )


async def test_publishes_keep_one_rate_across_web_processes_and_wait_out_a_429(
    deployment: Deployment,
) -> None:
    people = [f"UM{n}" for n in range(8)]
    env = {"HOME_PUBLISHES_PER_MINUTE": "30"}  # one every 2 s, five at once
    await deployment.web(**env)
    senders = [deployment.sender, await second_web(deployment, **env)]
    began = time.time()
    async with asyncio.TaskGroup() as group:
        for number, person in enumerate(people[:7]):
            group.create_task(open_through(senders[number % 2], deployment, person))
    times = sorted(c.at for c in deployment.slack.calls_to("views.publish") if c.at >= began)
    assert len(times) == 7
    # Five at once, then one per 2 s (the first was at 0 s).
    assert times[5] - times[0] >= 1.8 and times[6] - times[0] >= 3.8, times

    # Slack says wait 3 s: the other process waits too, and the refused tab is not dropped.
    deployment.slack.fail_next(
        "views.publish", 429, {"ok": False, "error": "ratelimited"}, headers={"Retry-After": "3"}
    )
    # The bucket is full again, and the first person's debounce long over.
    await refill_publish_rate(deployment.redis, deployment.keys)
    await lapse_debounce(deployment.redis, deployment.keys, people[:1])
    refused_at = time.time()
    status, _ = await senders[0].event(
        {"type": "app_home_opened", "user": people[0], "channel": "DUM0", "tab": "home"}
    )
    assert status == 200
    await deployment.slack.wait_for(
        lambda: published_to(deployment, people[0], refused_at), what="the refused publish"
    )
    for _ in range(200):  # the other web process publishes once the pause is set
        if await deployment.redis.exists(deployment.keys.home.publish_pause):
            break
        await asyncio.sleep(0.02)
    await open_through(senders[1], deployment, people[7])
    await deployment.slack.wait_for(
        lambda: len(published_to(deployment, people[0], refused_at)) == 2, what="the retry"
    )
    [refused, again] = published_to(deployment, people[0], refused_at)
    assert again - refused >= 2.9, (refused, again)
    [other] = published_to(deployment, people[7], refused_at)
    assert other - refused >= 2.9, (refused, other)
