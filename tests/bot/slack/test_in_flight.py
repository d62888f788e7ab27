"""Home tabs are drawn between the Slack requests a web process answers (`bot.slack.in_flight`)."""

from __future__ import annotations

import asyncio
import time

from bot.slack.in_flight import InFlight


async def test_background_work_waits_for_the_requests_in_flight() -> None:
    in_flight = InFlight()
    order: list[str] = []

    async def request(name: str, seconds: float) -> None:
        with in_flight.answering():
            await asyncio.sleep(seconds)
            order.append(name)

    async def tab() -> None:
        await in_flight.after_requests(most=5.0)
        order.append("tab")

    async with asyncio.TaskGroup() as group:
        group.create_task(request("click 1", 0.05))
        group.create_task(request("click 2", 0.1))
        await asyncio.sleep(0)
        group.create_task(tab())
    assert order == ["click 1", "click 2", "tab"]
    assert in_flight.count() == 0


async def test_nothing_waits_when_idle_and_a_request_holds_it_back_at_most_the_cap() -> None:
    in_flight = InFlight()
    began = time.monotonic()
    await in_flight.after_requests(most=5.0)
    assert time.monotonic() - began < 0.01
    with in_flight.answering():
        began = time.monotonic()
        await in_flight.after_requests(most=0.2)
        assert 0.19 <= time.monotonic() - began < 1.0
