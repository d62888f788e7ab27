"""Agents whose tools are the SDK's shell, apply_patch and custom tools, each needing approval,
and its local shell tool, which cannot ask.

Like `tests/support/agents.py`, every execution is written to the ledger
(`COUNTERSIGN_TEST_LEDGER`) as it
starts; nothing runs on the machine: the shell "runs" a command by echoing it back.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any

from agents import (
    Agent,
    ApplyPatchTool,
    CustomTool,
    LocalShellCommandRequest,
    LocalShellTool,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
)
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from agents.tool_context import ToolContext

from tests.support.agents import _ledger_client, each_ran


async def _record(entry: dict[str, Any]) -> None:
    ledger = os.environ.get("COUNTERSIGN_TEST_LEDGER")
    if not ledger:
        return
    url, key = ledger.split(" ")
    client = _ledger_client(url)
    try:
        await client.rpush(key, json.dumps({**entry, "dyno": os.environ.get("DYNO", "")}))
        await client.expire(key, 600)
    finally:
        await client.aclose()


async def run_commands(request: ShellCommandRequest) -> ShellResult:
    commands = request.data.action.commands
    await _record({"tool": "shell", "commands": commands, "call_id": request.data.call_id})
    for command in commands:
        if command.startswith("sleep "):  # long enough for a test's kill to land inside
            await asyncio.sleep(float(command.removeprefix("sleep ")))
    return each_ran(commands)


async def run_local(request: LocalShellCommandRequest) -> str:
    command = list(request.data.action.command)
    await _record({"tool": "local_shell", "command": command, "call_id": request.data.call_id})
    return "ran " + " ".join(command)


async def take_note(ctx: ToolContext[Any], text: str) -> str:
    await _record({"tool": "note", "input": text, "call_id": ctx.tool_call_id})
    return f"noted {text}"


class LedgerEditor:
    """An apply_patch editor that only records what it was asked to do."""

    async def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return await self._apply(operation)

    async def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return await self._apply(operation)

    async def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        return await self._apply(operation)

    async def _apply(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        await _record({"tool": "apply_patch", "type": operation.type, "path": operation.path})
        return ApplyPatchResult(status="completed", output=f"{operation.type} {operation.path}")


ops = Agent[Any](
    name="ops",
    instructions="You run shell commands and edit files.",
    tools=[
        ShellTool(executor=run_commands, needs_approval=True),
        ApplyPatchTool(editor=LedgerEditor(), needs_approval=True),
        CustomTool(
            name="note",
            description="Write down a note, in plain text.",
            on_invoke_tool=take_note,
            needs_approval=True,
        ),
        LocalShellTool(executor=run_local),  # the SDK never asks before it runs
    ],
)
REGISTRY = [ops]


@dataclass
class RemoteDesktopTool:
    """A tool of a kind Countersign cannot describe, which asks for approval."""

    name: str = "remote_desktop"
    needs_approval: bool = True


UNDESCRIBABLE = [
    ops,
    Agent[Any](name="desk", instructions="-", tools=[RemoteDesktopTool()]),  # type: ignore[list-item]
]
