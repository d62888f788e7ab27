"""An agent used as a tool whose own agent asks for approval: nested approvals.

Like the SDK's human-in-the-loop example: `ops` may call `respond_spanish` (the `spanish` agent
run as a tool, `Agent.as_tool`), which needs approval; the `spanish` agent then asks to run
`get_user_name`, which needs approval too. Its card says "`get_user_name` asked by *spanish*,
inside *ops*". `spanish` is not in the registry: it is reached only through the tool, and its
tool is journaled all the same (`runtime.agent_graph`). In the console: `/agent greet me in
spanish`.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, ModelSettings, function_tool
from agents.tool_context import ToolContext

NAMES: dict[str, str] = {"UALICE": "Alice", "UBOB": "Bob", "UCAROL": "Carol"}
"""Slack user id -> first name: the console's people (anyone else is "amigo")."""


@function_tool(needs_approval=True)
def get_user_name(ctx: ToolContext[Any]) -> str:
    """The first name of the person who asked, to greet them by name."""
    context = ctx.context if isinstance(ctx.context, dict) else {}
    return NAMES.get(str(context.get("requester", "")), "amigo")


spanish = Agent[Any](
    name="spanish",
    instructions=(
        "You respond in Spanish. Always call get_user_name first, greet the user by name and "
        "answer their question, in Spanish."
    ),
    model_settings=ModelSettings(tool_choice="required"),
    tools=[get_user_name],
)

respond_spanish = spanish.as_tool(
    tool_name="respond_spanish",
    tool_description="Respond to the user's question in Spanish",
    needs_approval=True,
)
