"""The tool journal for the tools that run in the worker but are not function tools.

The SDK itself runs a shell tool's `executor`, a local shell tool's `executor`, an apply_patch
tool's `editor` and a custom tool's `on_invoke_tool`. Each is wrapped once, through the same
`JournaledInvoker` as a function tool: its output is recorded the moment it returns, a retried
job gets the recorded output back instead of running the call again, the `executed` audit entry
goes in the same step, and the run's status counts it as ran. The arguments recorded are the
call's description (`runtime.calls.description`), so an `executed` entry carries the digest that
its approval bound.

An apply_patch editor is handed one operation and not the id of its call: its journal entry is
keyed by the operation's digest within the run (`patch-<digest>`), which for a call of one
operation (what the Responses API sends) is the digest its approval bound. The same patch asked
for twice in one run is therefore applied once; the second time, the model is told the first
outcome.

A hosted shell (`environment` a container) runs at OpenAI, not here: there is nothing to wrap.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from agents import (
    Agent,
    ApplyPatchTool,
    CustomTool,
    LocalShellTool,
    RunContextWrapper,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
)
from agents.editor import ApplyPatchEditor, ApplyPatchOperation, ApplyPatchResult
from agents.tool import LocalShellCommandRequest, LocalShellExecutor, ShellExecutor
from agents.tool_context import ToolContext

from runtime.calls.description import (
    APPLY_PATCH,
    LOCAL_SHELL,
    SHELL,
    field_of,
    local_shell_arguments,
    patch_arguments,
    shell_arguments,
)
from runtime.calls.digest import call_digest
from runtime.journal.invoker import JournaledInvoker
from runtime.journal.signals import past_the_sdk

PATCH_KEY_CHARS = 24
"""Hex digits of an operation's digest in its journal key: far from any collision."""


def journal_tool_kind(agent: Agent[Any], tool: object) -> int:
    """Wrap `tool` (once) if it is of a kind this module journals; 1 if it was wrapped now.

    `agent` is named in the audit entries of the tool's calls (the first agent found to offer
    it, for a tool object shared by several)."""
    if isinstance(tool, ShellTool) and tool.executor is not None:
        if isinstance(tool.executor, JournaledShellExecutor):
            return 0
        tool.executor = JournaledShellExecutor(tool.name, tool.executor, agent)
    elif isinstance(tool, LocalShellTool):
        if isinstance(tool.executor, JournaledLocalShellExecutor):
            return 0
        tool.executor = JournaledLocalShellExecutor(tool.name, tool.executor, agent)
    elif isinstance(tool, ApplyPatchTool):
        if isinstance(tool.editor, JournaledEditor):
            return 0
        tool.editor = JournaledEditor(tool.name, tool.editor, agent)
    elif isinstance(tool, CustomTool):
        if isinstance(tool.on_invoke_tool, JournaledInvoker):
            return 0
        tool.on_invoke_tool = JournaledInvoker(tool.name, tool.on_invoke_tool)
    else:
        return 0
    return 1


def _tool_context(
    wrapper: RunContextWrapper[Any] | None,
    call_id: str,
    tool: str,
    arguments: str,
    agent: Agent[Any],
) -> ToolContext[Any]:
    return ToolContext.from_agent_context(
        wrapper if wrapper is not None else RunContextWrapper(context=None),
        call_id,
        agent=agent,
        tool_name=tool,
        tool_arguments=arguments,
    )


async def _settled(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class JournaledShellExecutor:
    def __init__(self, tool_name: str, inner: ShellExecutor, agent: Agent[Any]) -> None:
        self._tool_name = tool_name
        self._inner = inner
        self._agent = agent

    async def __call__(self, request: ShellCommandRequest) -> str | ShellResult:
        async def run(_ctx: ToolContext[Any], _arguments: str) -> object:
            return stored_shell_result(await _settled(self._inner(request)))

        arguments = shell_arguments(request.data.raw)
        ctx = _tool_context(
            request.ctx_wrapper, request.data.call_id, self._tool_name, arguments, self._agent
        )
        journaled = JournaledInvoker(self._tool_name, run, kind=SHELL)
        return shell_result_of(await past_the_sdk(journaled(ctx, arguments)))


class JournaledLocalShellExecutor:
    def __init__(self, tool_name: str, inner: LocalShellExecutor, agent: Agent[Any]) -> None:
        self._tool_name = tool_name
        self._inner = inner
        self._agent = agent

    async def __call__(self, request: LocalShellCommandRequest) -> str:
        async def run(_ctx: ToolContext[Any], _arguments: str) -> object:
            return str(await _settled(self._inner(request)))

        arguments = local_shell_arguments(request.data)
        call_id = str(field_of(request.data, "call_id") or "")
        ctx = _tool_context(request.ctx_wrapper, call_id, self._tool_name, arguments, self._agent)
        journaled = JournaledInvoker(self._tool_name, run, kind=LOCAL_SHELL)
        return str(await past_the_sdk(journaled(ctx, arguments)))


class JournaledEditor:
    """An `ApplyPatchEditor` whose every operation goes through the journal."""

    def __init__(self, tool_name: str, inner: ApplyPatchEditor, agent: Agent[Any]) -> None:
        self._tool_name = tool_name
        self._inner = inner
        self._agent = agent

    async def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult | str | None:
        return await self._apply(operation, lambda: self._inner.create_file(operation))

    async def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult | str | None:
        return await self._apply(operation, lambda: self._inner.update_file(operation))

    async def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult | str | None:
        return await self._apply(operation, lambda: self._inner.delete_file(operation))

    async def _apply(
        self, operation: ApplyPatchOperation, apply: Any
    ) -> ApplyPatchResult | str | None:
        async def run(_ctx: ToolContext[Any], _arguments: str) -> object:
            return stored_patch_result(await _settled(apply()))

        arguments = patch_arguments([operation])
        digest = call_digest(self._tool_name, arguments, kind=APPLY_PATCH)
        key = f"patch-{digest[:PATCH_KEY_CHARS]}"
        ctx = _tool_context(operation.ctx_wrapper, key, self._tool_name, arguments, self._agent)
        journaled = JournaledInvoker(self._tool_name, run, kind=APPLY_PATCH)
        return patch_result_of(await past_the_sdk(journaled(ctx, arguments)))


def stored_shell_result(result: str | ShellResult) -> object:
    """A shell executor's result as JSON the journal can keep; `shell_result_of` reverses it."""
    if isinstance(result, ShellResult):
        return {"shell_result": dataclasses.asdict(result)}
    return str(result)


def shell_result_of(stored: object) -> str | ShellResult:
    if not isinstance(stored, dict) or not isinstance(stored.get("shell_result"), dict):
        return str(stored)
    result = stored["shell_result"]
    return ShellResult(
        output=[
            ShellCommandOutput(
                stdout=str(entry.get("stdout", "")),
                stderr=str(entry.get("stderr", "")),
                outcome=ShellCallOutcome(**entry.get("outcome") or {"type": "exit"}),
                command=entry.get("command"),
                provider_data=entry.get("provider_data"),
            )
            for entry in result.get("output") or []
        ],
        max_output_length=result.get("max_output_length"),
        provider_data=result.get("provider_data"),
    )


def stored_patch_result(result: ApplyPatchResult | str | None) -> object:
    if isinstance(result, ApplyPatchResult):
        return {"patch_result": {"status": result.status, "output": result.output}}
    return result if result is None else str(result)


def patch_result_of(stored: object) -> ApplyPatchResult | str | None:
    if isinstance(stored, dict) and isinstance(stored.get("patch_result"), dict):
        result = stored["patch_result"]
        return ApplyPatchResult(status=result.get("status"), output=result.get("output"))
    return stored if stored is None else str(stored)
