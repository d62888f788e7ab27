"""Agents for the model-turn tests (`tests/runtime/journal/test_model_turns.py`): `front` runs
`dictionary` as
a tool, `translate`, whose inner run's errors are raised, not told to `front`'s model
(`failure_error_function=None`): a model outage inside fails the job, which is retried with the
inner run not yet over. `look_up` needs no approval and records each execution as
`tests.support.agents`' tools do. `front`'s `parse_report` raises `RecursionError` to the runner
(`tests/runtime/judging/test_argument_bounds.py`)."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, function_tool
from agents.tool_context import ToolContext

from tests.support.agents import _record


@function_tool
async def look_up(ctx: ToolContext[Any], word: str) -> str:
    """Look a word up in the dictionary."""
    await _record(ctx, "look_up", {"word": word})
    return f"{word}: found"


@function_tool(failure_error_function=None)
async def parse_report(ctx: ToolContext[Any], report: str) -> str:
    """Parse a report: one nested too deeply for the parser."""
    await _record(ctx, "parse_report", {"report": report})
    return str(json.loads("[" * 100_000 + "]" * 100_000))


dictionary = Agent[Any](name="dictionary", instructions="You look words up.", tools=[look_up])

front = Agent[Any](
    name="front",
    instructions="You help.",
    tools=[
        dictionary.as_tool(
            tool_name="translate",
            tool_description="Translate a word",
            failure_error_function=None,
        ),
        parse_report,
    ],
)

REGISTRY = [front]
