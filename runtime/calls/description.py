"""What a pending call will run, as the text its card shows and its digest binds.

Function tools, MCP tools (of an `mcp_servers` server or hosted) and custom tools carry the
model's arguments: those are the description, unchanged, so the digests of stored approvals and
grants still match. Shell, local shell and apply_patch calls carry none (their approval item's
`arguments` is None); their description is canonical JSON of what the raw call asks to run, so
that two different commands never look, or digest, alike:

- shell: `{"commands": [...], "timeout_ms": ..., "max_output_length": ...}` (and the
  `working_directory` when the call names one);
- local shell: `{"command": [...], "env": {...}, "timeout_ms": ..., "user": ...,
  "working_directory": ...}`;
- apply_patch: `{"operations": [{"type": ..., "path": ..., "diff": ..., "move_to": ...}]}`.

`tool_kind` names these kinds; `call_digest` covers the kind, so a function tool that happens to
be called `shell` never shares a digest with the shell tool.

`refusal` is the registry's check: a tool that may ask for approval must be of a kind described
here, else its card would show nothing of what would run and its approval would bind nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents import (
    ApplyPatchTool,
    CustomTool,
    FunctionTool,
    HostedMCPTool,
    LocalShellTool,
    ShellTool,
    ToolApprovalItem,
)

SHELL = "shell"
LOCAL_SHELL = "local_shell"
APPLY_PATCH = "apply_patch"
_KIND_OF_RAW_TYPE = {
    "shell_call": SHELL,
    "local_shell_call": LOCAL_SHELL,
    "apply_patch_call": APPLY_PATCH,
}
DESCRIBED_TOOLS = (
    FunctionTool,
    CustomTool,
    HostedMCPTool,
    ShellTool,
    LocalShellTool,
    ApplyPatchTool,
)
"""The tool kinds whose calls can be shown and bound: the only ones that may ask a person."""


def tool_kind(item: ToolApprovalItem) -> str | None:
    """`shell`, `local_shell` or `apply_patch`; None for a call that carries its arguments."""
    return _KIND_OF_RAW_TYPE.get(str(field_of(item.raw_item, "type")))


def described_arguments(item: ToolApprovalItem) -> str:
    """What the call will run: the model's arguments, or the description of a raw call."""
    kind = tool_kind(item)
    if kind == SHELL:
        return shell_arguments(item.raw_item)
    if kind == LOCAL_SHELL:
        return local_shell_arguments(item.raw_item)
    if kind == APPLY_PATCH:
        return patch_arguments(_raw_operations(item.raw_item))
    return item.arguments or ""


def shell_arguments(call: Any) -> str:
    """A shell call (the raw item, as the model sent it and as the executor gets it in
    `ShellCallData.raw`)."""
    action = field_of(call, "action")
    described: dict[str, object] = {
        "commands": [str(c) for c in field_of(action, "commands") or [] if c is not None],
        "timeout_ms": field_of(action, "timeout_ms"),
        "max_output_length": field_of(action, "max_output_length"),
    }
    directory = field_of(action, "working_directory")
    if directory is not None:
        described["working_directory"] = directory
    return canonical(described)


def local_shell_arguments(call: Any) -> str:
    action = field_of(call, "action")
    return canonical(
        {
            "command": [str(c) for c in field_of(action, "command") or []],
            "env": dict(field_of(action, "env") or {}),
            "timeout_ms": field_of(action, "timeout_ms"),
            "user": field_of(action, "user"),
            "working_directory": field_of(action, "working_directory"),
        }
    )


def patch_arguments(operations: Sequence[Any]) -> str:
    """Raw operations of an apply_patch call, or the SDK's `ApplyPatchOperation`s it runs."""
    return canonical(
        {
            "operations": [
                {
                    "type": field_of(op, "type"),
                    "path": field_of(op, "path"),
                    "diff": field_of(op, "diff"),
                    "move_to": field_of(op, "move_to"),
                }
                for op in operations
            ]
        }
    )


def _raw_operations(call: Any) -> list[Any]:
    many = field_of(call, "operations")
    if isinstance(many, list):
        return many
    one = field_of(call, "operation")
    return [] if one is None else [one]


def refusal(agent: str, tool: object) -> str | None:
    """Why `agent` may not offer `tool` (one line naming both), or None: a tool that may ask
    for approval and is not of a kind whose calls can be described."""
    if isinstance(tool, DESCRIBED_TOOLS):
        return None
    asks = getattr(tool, "needs_approval", False)
    if asks is False or asks is None:
        return None
    name = getattr(tool, "name", None) or "?"
    return (
        f"agent {agent!r}: tool {name!r} ({type(tool).__name__}) needs approval, but Countersign "
        "cannot describe what its calls would run, so no card could show it and no approval "
        "could bind to it. Remove the tool or its needs_approval, or use a function tool."
    )


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def field_of(raw: Any, name: str) -> Any:
    """Raw items are dicts when restored from a saved run, models when fresh."""
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)
