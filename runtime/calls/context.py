"""What a card shows about a call beyond its arguments, read from the SDK's run result: why the
model asked (what it said just before), and the tool's parameter schema, which lets a person's
edit be checked where no tool objects exist (the web process)."""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, ItemHelpers, MessageOutputItem, RunResult, ToolCallOutputItem
from agents.items import ToolApprovalItem

from runtime.journal.invoker import JournaledInvoker
from runtime.mcp.origin import mcp_server_of
from runtime.runs.agent_graph import tool_agent

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
