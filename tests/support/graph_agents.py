"""Agents the registry does not list: reached through a `handoff(agent)` object and through
agents used as tools (`Agent.as_tool`), like the SDK's own human-in-the-loop example
(`respond_spanish`, whose agent asks to run `get_user_name`). Only `front` is registered.

Their tools record each execution as `tests.support.agents`' do (the ledger of real processes).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, function_tool, handoff
from agents.tool_context import ToolContext

from tests.support.agents import _record


@function_tool(needs_approval=True)
async def restart_service(ctx: ToolContext[Any], service: str) -> str:
    """Restart a service."""
    await _record(ctx, "restart_service", {"service": service})
    return f"restarted {service}"


@function_tool(needs_approval=True)
async def get_user_name(ctx: ToolContext[Any]) -> str:
    """The name of the user the agent answers."""
    await _record(ctx, "get_user_name", {})
    return "Ada"


@function_tool(needs_approval=True)
async def look_up_word(ctx: ToolContext[Any], word: str, seconds: float = 0.0) -> str:
    """Look a word up in the dictionary (in `seconds`: a kill can land inside)."""
    await _record(ctx, "look_up_word", {"word": word})
    await asyncio.sleep(seconds)
    return f"{word}: hola"


mechanic = Agent[Any](
    name="mechanic", instructions="You restart services.", tools=[restart_service]
)

spanish = Agent[Any](name="spanish", instructions="You respond in Spanish.", tools=[get_user_name])

dictionary = Agent[Any](name="dictionary", instructions="You look words up.", tools=[look_up_word])

front = Agent[Any](
    name="front",
    instructions="You help.",
    handoffs=[handoff(mechanic)],
    tools=[
        spanish.as_tool(
            tool_name="respond_spanish",
            tool_description="Respond to the user's question in Spanish",
            needs_approval=True,
        ),
        dictionary.as_tool(tool_name="translate", tool_description="Translate a word"),
    ],
)

REGISTRY = [front]


def _after_deploy() -> Agent[Any]:
    """`front` after a deploy that took `get_user_name` away from `spanish`."""
    spanish_after = spanish.clone(tools=[])
    respond = spanish_after.as_tool(
        tool_name="respond_spanish",
        tool_description="Respond to the user's question in Spanish",
        needs_approval=True,
    )
    return front.clone(tools=[respond, *front.tools[1:]])


REGISTRY_AFTER_DEPLOY = [_after_deploy()]
