"""An agent whose tool declares an invalid JSON schema for its arguments (`"type": 12`), for the
edit tests: its calls are approved or rejected as they are, never edited."""

from __future__ import annotations

import dataclasses
from typing import Any

from agents import Agent, function_tool

from tests.support.agents import EXECUTIONS


@function_tool(needs_approval=True)
async def tune(level: int) -> str:
    """Tune the engine."""
    EXECUTIONS.append(("tune", {"level": level}))
    return f"tuned to {level}"


BROKEN_SCHEMA = {
    "type": "object",
    "properties": {"level": {"type": 12}},
    "required": ["level"],
    "additionalProperties": False,
}
broken = dataclasses.replace(tune, params_json_schema=BROKEN_SCHEMA, strict_json_schema=False)

ops = Agent[Any](name="ops", instructions="You tune engines.", tools=[broken])

REGISTRY = [ops]
