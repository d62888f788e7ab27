"""The Home tab at scale: what one change costs when 200 people have the tab open.

    .venv/bin/python -m bench.home_fanout [--viewers 200] [--open 100] [--webs 1,2] [--rate 100]
        [--deciders group|channel]

Real `web` (one or two, sharing the Redis) and `worker` processes, a private Redis, a fake Slack
and an instant model. `APPROVERS` names one user group of `--viewers` members, so every call may
be decided by each of them; with `--deciders channel`, nobody is named (the default policy: anyone
in the channel) and Slack lists the viewers in the runs' channel (`conversations.members`). First
`--open` approvals are left waiting; then every member opens the Home tab (half through each web
when there are two); then one more run asks for a call: a change that concerns every viewer (they
may all decide it). While its fan-out runs, members approve earlier cards (signed clicks, 20 per
second), and their acknowledgements are timed, from a process of their own (`bench.click_timer`:
this one serves the fake Slack API, whose work on the publishes would delay the timing). The
publishes and commands are counted for a first change alone; the clicks come with a second.
Last, one viewer opens their tab alone, and the commands until it is published are counted.
`--rate` is `HOME_PUBLISHES_PER_MINUTE` (Slack's Tier 4 floor by default): at 100 a minute a
fan-out to 200 tabs takes two minutes, by design.

Printed per web count: `views.publish` calls for the change (in all and per affected viewer),
Redis commands per publish (`total_commands_processed` over the window, the change's own work
included, divided by the publishes; and beyond what the processes spend idle over as long,
measured for `IDLE_SECONDS` first: a paced fan-out lasts minutes), whether every viewer's tab
was published, and click -> ack.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.click_timer import Click, ClickTimer, Plan
from bench.harness import approve_then_answer, header, percentile, poll_until, waiting_cards
from bot.console.slack_payloads import interaction_form
from bot.home.pace import PUBLISHES_PER_MINUTE
from runtime.db.local import RedisServer, free_port
from tests.support.deployment import Deployment
from tests.support.processes import Process, procfile, wait_until_healthy
from tests.support.slack_requests import SlackSender

GROUP = "S0APPROVERS"
CLICKS = 20
CLICK_RATE = 20.0
OPEN_RATE = 20.0
IDLE_SECONDS = 5.0
"""Commands are counted this long with nothing changing, as the processes' idle rate."""
QUIET_SECONDS = 3.0
"""The fan-out is over when no tab has been published for this long."""


def member(number: int) -> str:
    return f"UM{number:05d}"


async def commands(running: Deployment) -> int:
    info: Any = await running.redis.info("stats")
    return int(info["total_commands_processed"])


def publishes(running: Deployment) -> list[Any]:
    return running.slack.calls_to("views.publish")


async def quiet(running: Deployment, within: float = 600.0) -> None:
    """Until no publish for `QUIET_SECONDS`."""
    deadline = time.monotonic() + within
    seen, since = len(publishes(running)), time.monotonic()
    while time.monotonic() - since < QUIET_SECONDS:
        if time.monotonic() > deadline:
            raise AssertionError("the Home tabs never settled")
        await asyncio.sleep(0.1)
        if (now := len(publishes(running))) != seen:
            seen, since = now, time.monotonic()


async def measure(
    viewers: int, open_calls: int, webs: int, rate: int, deciders: str
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(directory=Path(directory) / "redis")
        server.start()
        running = Deployment(server.url, "home:", Path(directory))
        people = [member(n) for n in range(viewers)]
        running.slack.groups[GROUP] = {"handle": "approvers", "users": people}
        env = {"HOME_PUBLISHES_PER_MINUTE": str(rate)}
        if deciders == "group":
            env["APPROVERS"] = GROUP
        running.slack.channel_members["CGENERAL"] = ["UALICE", *people]
        try:
            await running.start()
            running.model.script = approve_then_answer
            await running.web(**env)
            senders = [running.sender]
            for number in range(2, webs + 1):
                port = free_port()
                process = Process(
                    f"web.{number}",
                    procfile()["web"],
                    running.env(PORT=str(port), **env),
                    running.logs,
                )
                running.processes.append(process)
                await wait_until_healthy(f"http://127.0.0.1:{port}/healthz", process)
                senders.append(
                    SlackSender(
                        running.session,
                        f"http://127.0.0.1:{port}/slack/events",
                        running.sender.secret,
                        running.slack,
                    )
                )
            running.worker("worker.1", **env)
            cards = await waiting_cards(running, open_calls + 1)  # one more: the warm-up's
            for number, person in enumerate(people):
                # Paced: 200 people do not open the tab in the same second.
                await asyncio.sleep(1 / OPEN_RATE)
                event = {"type": "app_home_opened", "user": person, "channel": f"D{person}"}
                status, _ = await senders[number % webs].event({**event, "tab": "home"})
                assert status == 200
            await quiet(running)
            first = {c.args["user_id"] for c in publishes(running)} & set(people)
            await asyncio.sleep(2.5)  # the openings' debounce lapses

            # What the processes spend idle (pollers, heartbeats), to tell the fan-out's own.
            idle_from, idle_at = await commands(running), time.monotonic()
            await asyncio.sleep(IDLE_SECONDS)
            idle_rate = (await commands(running) - idle_from - 1) / (time.monotonic() - idle_at)

            # One change alone: what it costs.
            before_publishes, before_commands = len(publishes(running)), await commands(running)
            change_at, change_clock = time.time(), time.monotonic()
            status, _ = await running.sender.command("delete u-100 (the change)")
            assert status == 200
            await poll_until(lambda: len(running.slack.cards()) > len(cards), 60, "the card", 0.02)
            await quiet(running)
            after = publishes(running)[before_publishes:]
            spent = await commands(running) - before_commands - 1
            idle_share = idle_rate * (time.monotonic() - change_clock)
            await asyncio.sleep(2.5)

            # Another, and clicks on earlier cards while its fan-out runs, sent and timed from
            # a process of their own (`bench.click_timer`).
            plan = Plan(
                secret=running.sender.secret,
                clicks=[
                    Click(
                        after_seconds=number / CLICK_RATE,
                        url=senders[number % webs].url,
                        body=interaction_form(
                            running.sender.click_payload(
                                card, "approve", user=people[number % viewers]
                            )
                        ),
                    )
                    for number, card in enumerate(cards[1 : CLICKS + 1])
                ],
            )
            timer = ClickTimer(plan)
            await timer.start()
            shown = len(running.slack.cards())
            status, _ = await running.sender.command("delete u-100 (the second change)")
            assert status == 200
            await poll_until(lambda: len(running.slack.cards()) > shown, 60, "the card", 0.02)
            timings = await timer.go()
            assert set(timings.statuses) == {200}, timings.statuses
            latencies = timings.ack_ms
            await quiet(running)

            # One tab opened alone, once its debounce and the bucket allow.
            await asyncio.sleep(2.5)
            alone, before_alone = people[-1], len(publishes(running))
            before_commands = await commands(running)
            event = {"type": "app_home_opened", "user": alone, "channel": f"D{alone}"}
            status, _ = await running.sender.event({**event, "tab": "home"})
            assert status == 200
            await poll_until(
                lambda: any(c.args["user_id"] == alone for c in publishes(running)[before_alone:]),
                30,
                "the tab opened alone",
                0.01,
            )
            alone_commands = await commands(running) - before_commands - 1
        finally:
            await running.stop()
            server.stop()
    published = {c.args["user_id"] for c in after if c.at >= change_at}
    return {
        "webs": webs,
        "first_tabs": len(first),
        "publishes": len(after),
        "per_viewer": len(after) / viewers,
        "commands_per_publish": spent / max(1, len(after)),
        "net_per_publish": (spent - idle_share) / max(1, len(after)),
        "idle_rate": idle_rate,
        "commands": spent,
        "every_tab": set(people) <= published,
        "tabs_published": len(published & set(people)),
        "ack_p50": statistics.median(latencies),
        "ack_p99": percentile(latencies, 99),
        "alone_commands": alone_commands,
        "fanout_seconds": max(c.at for c in after) - change_at,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--open", type=int, default=100)
    parser.add_argument("--webs", default="1,2")
    parser.add_argument("--rate", type=int, default=PUBLISHES_PER_MINUTE)
    parser.add_argument("--deciders", choices=("group", "channel"), default="group")
    options = parser.parse_args()
    header(
        f"Home tab fan-out: {options.viewers} viewers, {options.open} open approvals, "
        f"deciders by {options.deciders}",
        "python -m bench.home_fanout",
    )
    for webs in (int(w) for w in options.webs.split(",")):
        found = asyncio.run(
            measure(options.viewers, options.open, webs, options.rate, options.deciders)
        )
        print(
            f"{webs} web(s): {found['publishes']} publishes for the change "
            f"({found['per_viewer']:.2f} per affected viewer), "
            f"{found['commands_per_publish']:.0f} Redis commands per publish "
            f"({found['commands']} in all; {found['net_per_publish']:.1f} per publish beyond "
            f"the idle {found['idle_rate']:.1f}/s), every tab published: {found['every_tab']} "
            f"({found['tabs_published']}/{options.viewers}), click ack p50 "
            f"{found['ack_p50']:.1f} ms p99 {found['ack_p99']:.1f} ms; "
            f"first tabs on opening: {found['first_tabs']}/{options.viewers}; "
            f"fan-out {found['fanout_seconds']:.0f} s at {options.rate}/min; "
            f"a tab opened alone: {found['alone_commands']} commands",
            flush=True,
        )


if __name__ == "__main__":
    main()
