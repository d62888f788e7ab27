"""What a card shows about a call beyond its arguments, read from the SDK's run result: why the
model asked (what it said just before), and the tool's parameter schema, which lets a person's
edit be checked where no tool objects exist (the web process)."""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, ItemHelpers, MessageOutputItem, RunResult, ToolCallOutputItem
from agents.items import ToolApprovalItem

from runtime.agent_graph import tool_agent
from runtime.calls.description import described_arguments, tool_kind
from runtime.journal.invoker import JournaledInvoker
from runtime.judging.arguments import NO_SCHEMA, ArgumentSchema, JudgedArguments
from runtime.judging.tool_schemas import function_tool_schema
from runtime.mcp.origin import mcp_server_of

WHY_CHARS = 600


def why_of(result: RunResult) -> str | None:
    """The model's last message of the turn that asked for the calls, shortened; None if it
    said nothing before calling."""
    text: str | None = None
    for item in result.new_items:
        if isinstance(item, MessageOutputItem):
            text = ItemHelpers.text_message_output(item).strip() or None
        elif isinstance(item, ToolCallOutputItem):
            text = None  # an earlier turn's words: not why it asks now
    return shorten(text, WHY_CHARS) if text else None


def function_tool_of(item: ToolApprovalItem) -> FunctionTool | None:
    """The function tool an interruption would call, from its agent; None for a tool from an
    MCP server (rebuilt from each listing: no preview, no edit)."""
    if mcp_server_of(item) is not None:
        return None
    for tool in item.agent.tools:
        if isinstance(tool, FunctionTool) and tool.name == item.name:
            return tool
    return None


def argument_schema(item: ToolApprovalItem) -> ArgumentSchema:
    """How the function tool of an interruption receives its arguments (`NO_SCHEMA` for any
    other tool: an MCP tool's schema comes from its listing, `runtime.mcp.tools`)."""
    tool = function_tool_of(item)
    if tool is None:
        return NO_SCHEMA
    invoker = tool.on_invoke_tool
    if isinstance(invoker, JournaledInvoker) and invoker.argument_schema is not None:
        return invoker.argument_schema  # made before the journal wrapped the SDK's invoker
    return function_tool_schema(tool)


def judged_arguments(
    item: ToolApprovalItem, schema: ArgumentSchema | None = None
) -> JudgedArguments:
    """What the call will run, as the tool receives it (`runtime.judging.arguments`): a shell
    or patch call's description as it is, a tool's arguments through its schema."""
    described = described_arguments(item)
    if tool_kind(item) is not None:
        return JudgedArguments(text=described)
    return (schema or argument_schema(item)).judged(described)


def editable_schema(item: ToolApprovalItem) -> dict[str, Any] | None:
    """The tool's arguments schema if its calls can run with edited arguments (a function tool
    whose invoker Countersign wraps, `runtime.journal.invoker`); None: no Edit. Never for an agent
    used as a tool: its run may stop for approvals inside and resume in a later round, whose
    calls no longer carry the edit (the model would not be told of it)."""
    tool = function_tool_of(item)
    if tool is None or tool_agent(tool) is not None:
        return None
    if not isinstance(tool.on_invoke_tool, JournaledInvoker):
        return None
    return dict(tool.params_json_schema)


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
