"""Agents for the tests of the one judging place (`tests/runtime/judging/test_judging.py`): real
SDK agents
whose tools record that they ran (`tests.support.agents.EXECUTIONS`).

`dba` drops tables (`drop_table`, a `function_tool` whose `force` pydantic converts from
`"true"`), refunds orders, purges caches through a hand-written `FunctionTool` that converts
nothing, and hands off to `janitor`, which has a `drop_table` of its own.
"""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, FunctionTool, function_tool, handoff
from agents.tool_context import ToolContext

from tests.support.agents import _record, refund_order


@function_tool(needs_approval=True)
async def drop_table(ctx: ToolContext[Any], name: str, force: bool = False) -> str:
    """Drop a table (`force`: even when it is not empty)."""
    await _record(ctx, "drop_table", {"name": name, "force": force})
    return f"dropped {name}" + (" (forced)" if force else "")


async def _purge(ctx: ToolContext[Any], arguments: str) -> str:
    """What a hand-written tool receives: the model's text, as it is."""
    received = json.loads(arguments)
    await _record(ctx, "purge_cache", received)
    return f"purged {received.get('region')} (force={received.get('force')!r})"


purge_cache = FunctionTool(
    name="purge_cache",
    description="Purge a region's cache.",
    params_json_schema={
        "type": "object",
        "properties": {"region": {"type": "string"}, "force": {"type": "boolean"}},
        "required": ["region"],
        "additionalProperties": False,
    },
    on_invoke_tool=_purge,
    strict_json_schema=False,
    needs_approval=True,
)

janitor = Agent[Any](name="janitor", instructions="You clean up.", tools=[drop_table])
dba = Agent[Any](
    name="dba",
    instructions="You look after databases.",
    tools=[drop_table, refund_order, purge_cache],
    handoffs=[handoff(janitor)],
)

REGISTRY = [dba, janitor]
