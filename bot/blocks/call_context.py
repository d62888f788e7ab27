"""Block Kit for what a card shows beyond the arguments: the task (shortened), why the model
asked (its words just before the call), and the tool's preview of the call's effect."""

from __future__ import annotations

from bot.blocks.parts import Block, section
from bot.words import choices as choice_messages
from runtime.record import PendingCall
from runtime.reporter import RunView

TASK_CHARS = 200


def context_blocks(run: RunView, call: PendingCall) -> list[Block]:
    task = run.task if len(run.task) <= TASK_CHARS else run.task[: TASK_CHARS - 1] + "…"
    lines = [choice_messages.task_line(task)]
    if call.why:
        lines.append(choice_messages.why_line(call.why))
    return [section("\n".join(lines)[:3000])]


def preview_blocks(call: PendingCall) -> list[Block]:
    """The preview, or "no preview" when the tool has one that failed; nothing without one.
    The worker made it for the model's arguments: once they are edited it says nothing true of
    the call, so the card says that instead of showing it (and once decided, the worker's
    preview of the edited arguments: `edited_preview_blocks`)."""
    if call.preview is None:
        return []
    if call.shown_arguments != call.arguments:
        text = choice_messages.PREVIEW_BEFORE_EDIT
    else:
        text = choice_messages.preview_section(call.preview)[:3000]
    return [section(text)]


def edited_preview_blocks(call: PendingCall) -> list[Block]:
    """On a decided card, the preview of the edited arguments the approval binds, made by the
    worker just before running them (`runtime.runs.edited_previews`); nothing until then."""
    if call.edited_preview is None:
        return []
    text = choice_messages.edited_preview_section(call.edited_preview)[:3000]
    return [section(text)]
