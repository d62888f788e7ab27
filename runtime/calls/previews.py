"""Effect previews: a tool may declare a side-effect-free function that says what a call would
do, and the card shows it under "Preview" before anyone decides.

    @function_tool(needs_approval=True)
    def delete_user(user_id: str) -> str: ...

    @preview(delete_user)
    def preview_delete_user(user_id: str) -> str:
        return f"Would delete {USERS[user_id]['name']} and their 3 projects."

A preview takes the tool's arguments as keyword arguments (sync or async) and returns text. It
must not change anything: it runs for every card, also for calls that are then rejected, and
again on the edited arguments just before an edited call runs (`runtime.runs.edited_previews`).
The worker runs the previews of a round's calls together before posting their cards; one that
raises or takes longer than `PREVIEW_TIMEOUT_SECONDS` shows "no preview", and never holds a card
back longer than that. A synchronous one runs on a thread of a bounded set
(`runtime.calls.preview_threads`): while hung ones hold them all, a preview is not run and shows
"no preview" at once. A rule may say `preview = false` (`runtime.policy`): its calls' previews
are never called.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agents import FunctionTool

from runtime.calls.preview_threads import PreviewThreads, PreviewThreadsBusy

log = logging.getLogger(__name__)

PREVIEW_TIMEOUT_SECONDS = 3.0
PREVIEW_CHARS = 1500
FAILED = ""
"""A preview that exists but failed or was too slow: the card says "no preview"."""

PreviewFunction = Callable[..., str | Awaitable[str]]
_P = TypeVar("_P", bound=PreviewFunction)
_ATTRIBUTE = "countersign_preview"
THREADS = PreviewThreads()
"""The process's threads for synchronous previews."""


def preview(tool: FunctionTool) -> Callable[[_P], _P]:
    """Declare the decorated function as `tool`'s preview."""

    def register(function: _P) -> _P:
        setattr(tool, _ATTRIBUTE, function)
        return function

    return register


def preview_of(tool: FunctionTool | None) -> PreviewFunction | None:
    found = getattr(tool, _ATTRIBUTE, None) if tool is not None else None
    return found if callable(found) else None


async def run_previews(
    wanted: dict[str, tuple[PreviewFunction, str]], *, run_id: str
) -> dict[str, str]:
    """Call id -> preview text (`FAILED` for a preview that raised or timed out), for each
    (preview, arguments JSON) in `wanted`, all at once within `PREVIEW_TIMEOUT_SECONDS`."""
    if not wanted:
        return {}
    ids = list(wanted)
    outcomes = await asyncio.gather(
        *(_bounded(*wanted[call_id]) for call_id in ids), return_exceptions=True
    )
    texts = {}
    for call_id, outcome in zip(ids, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if isinstance(outcome, asyncio.CancelledError):
                raise outcome
            if isinstance(outcome, PreviewThreadsBusy):
                log.warning(
                    "run %s: preview of call %s not run: all %d preview threads are still busy "
                    "(previews that hang)",
                    run_id,
                    call_id,
                    THREADS.size,
                )
            else:
                log.warning(
                    "run %s: preview of call %s failed: %s",
                    run_id,
                    call_id,
                    type(outcome).__name__,
                )
            texts[call_id] = FAILED
        else:
            texts[call_id] = outcome
    return texts


async def _bounded(function: PreviewFunction, arguments: str) -> str:
    return await asyncio.wait_for(_call(function, arguments), PREVIEW_TIMEOUT_SECONDS)


async def _call(function: PreviewFunction, arguments: str) -> str:
    parsed: Any = json.loads(arguments) if arguments else {}
    if not isinstance(parsed, dict):
        raise TypeError("arguments are not a JSON object")
    if inspect.iscoroutinefunction(function):
        result = await function(**parsed)
    else:
        # A slow synchronous preview must not stall the worker's other runs.
        result = await THREADS.run(function, parsed)
        if inspect.isawaitable(result):
            result = await result
    text = str(result).strip()
    return text[:PREVIEW_CHARS] or FAILED
