"""Which MCP server a pending tool call comes from, read from the SDK's own interruption."""

from __future__ import annotations

from typing import Any

from agents import ToolApprovalItem
from agents.tool import ToolOriginType

HOSTED_REQUEST = "mcp_approval_request"


def mcp_server_of(item: ToolApprovalItem) -> str | None:
    """The server's name for a tool from an `mcp_servers` server (the SDK records it as the
    call's origin, also in a saved RunState); a hosted MCP tool's `server_label` for its
    approval request; None for function tools."""
    origin = item.tool_origin
    if origin is not None and origin.type == ToolOriginType.MCP:
        return origin.mcp_server_name or "?"
    if _field(item.raw_item, "type") == HOSTED_REQUEST:
        label = _field(item.raw_item, "server_label")
        return str(label) if label else "?"
    return None


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)
