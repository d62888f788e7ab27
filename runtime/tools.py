"""What a tool author imports: run-once keys, previews, and the declaration "safe to repeat".

    from runtime.tools import idempotency_key, preview, safe_to_repeat

    @safe_to_repeat
    @function_tool
    async def list_users(team: str) -> str: ...

Every call is marked started before its tool runs (`runtime.record.starts`). A worker that dies
inside a tool leaves a mark without an outcome, and the retry does not run the call again but
asks a person ("`pay` may have run; its result was lost", **Run again**). A tool whose effect is
the same when repeated (it only reads, or it passes `idempotency_key(ctx)` to the system it
changes) can say so with `safe_to_repeat`: its call then runs again on the retry without asking.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from runtime.calls.previews import preview
from runtime.journal.invoker import idempotency_key
from runtime.record.starts import SAFE_TO_REPEAT

__all__ = ["idempotency_key", "preview", "safe_to_repeat"]


def safe_to_repeat(tool: FunctionTool) -> FunctionTool:
    """Declare that running `tool` twice for one call does no harm; returns `tool`."""
    if not isinstance(tool, FunctionTool):
        raise TypeError(
            f"safe_to_repeat takes a function tool, not {type(tool).__name__}: put it above "
            "@function_tool"
        )
    try:
        setattr(tool.on_invoke_tool, SAFE_TO_REPEAT, True)
    except AttributeError:  # an invoker that takes no attributes (a bound method): wrapped
        tool.on_invoke_tool = _Repeatable(tool.on_invoke_tool)
    return tool


class _Repeatable:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        setattr(self, SAFE_TO_REPEAT, True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __call__(self, ctx: ToolContext[Any], arguments: str) -> Any:
        return await self._inner(ctx, arguments)
