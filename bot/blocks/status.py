"""The run's status message: its words (what the run waits for, and at the end whether anything
ran), and a **Stop** button while the run is alive."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import ActionsBlock, AlertBlock, ButtonElement, SectionBlock

from bot.blocks.batch import batch_buttons
from bot.blocks.parts import Block, context_block, mrkdwn
from bot.words import commands as command_words
from bot.words import runs as messages
from bot.words import verdicts as verdict_words
from runtime.reporter import Activity

ACTION_STOP = "stop_run"
ALIVE_STATES = frozenset({"working", "waiting"})

STATUS_HEADLINES = {
    "working": ":hourglass_flowing_sand: Working…",
    "waiting": ":raised_hand: Waiting for approval",
    "done": ":white_check_mark: Done",
    "failed": ":x: Failed",
    "stopped": ":no_entry: Stopped",
}
NOT_RUN_WORDS = {
    "rejected": "was rejected",
    "answered": "was answered by a person instead",
    "expired": "expired: nobody decided in time",
    "policy": "is not allowed by the policy",
}


def status_step(step: str) -> str:
    kind, _, name = step.partition(":")
    if kind == "tool":
        return f"called `{messages.escape(name)}`"
    if kind == "handoff":
        return f"handed off to *{messages.escape(name)}*"
    if kind == "always":
        tool, _, user_id = name.partition(":")
        return verdict_words.approved_by_always(tool, user_id)
    return messages.escape(step)


def _not_run(note: str) -> str:
    kind, _, tool = note.partition(":")
    return f"`{messages.escape(tool)}` {NOT_RUN_WORDS.get(kind, 'did not run')}"


def _tools(tools: Sequence[str]) -> str:
    return ", ".join(f"`{messages.escape(tool)}`" for tool in dict.fromkeys(tools))


def status_headline(activity: Activity) -> str:
    """The status message's first line: what the run is doing, or how it ended."""
    if activity.state == "waiting" and activity.waiting_for:
        open_, asked = len(activity.waiting_for), max(activity.approvals_asked, 1)
        tools = _tools(activity.waiting_for)
        if open_ < asked:
            return f":raised_hand: Waiting for {open_} of {asked} approvals ({tools})"
        if open_ == 1:
            return f":raised_hand: Waiting for approval ({tools})"
        return f":raised_hand: Waiting for {open_} approvals ({tools})"
    if activity.state == "done" and not activity.ran:
        why = "; ".join(_not_run(note) for note in activity.not_run)
        return f":no_entry_sign: Nothing ran: {why or 'the agent answered without calling a tool'}"
    return STATUS_HEADLINES.get(activity.state, messages.escape(activity.state))


def _grouped(steps: Sequence[str]) -> list[tuple[str, int]]:
    """Each step with how many times it came in a row: three deletions are one line."""
    grouped: list[tuple[str, int]] = []
    for step in steps:
        if grouped and grouped[-1][0] == step:
            grouped[-1] = (step, grouped[-1][1] + 1)
        else:
            grouped.append((step, 1))
    return grouped


LINES_SHOWN = 12
"""The status message's last lines of steps: the rest of a long run is in its thread."""


def status_text(activity: Activity) -> str:
    lines = [
        f"• {status_step(step)}" + (f" \N{MULTIPLICATION SIGN}{times}" if times > 1 else "")
        for step, times in _grouped(activity.steps)[-LINES_SHOWN:]
    ]
    if activity.state == "done" and activity.ran:
        lines += [f"• {_not_run(note)}" for note in activity.not_run]
    return "\n".join([status_headline(activity), *lines])


def status_blocks(run_id: str, text: str, state: str, *, batch: bool = False) -> list[Block]:
    """`batch`: two or more calls wait that may be decided at once (`Activity.batchable`).
    The run id at the foot is what `/agent stop` and `/agent audit` take."""
    blocks: list[Block] = [SectionBlock(text=text)]
    if state in ALIVE_STATES:
        stop = ButtonElement(
            text=messages.STOP, action_id=ACTION_STOP, value=run_id, style="danger"
        )
        extra = batch_buttons(run_id) if batch and state == "waiting" else []
        blocks.append(ActionsBlock(elements=[*extra, stop]))
    blocks.append(context_block(command_words.run_id_line(run_id)))
    return blocks


ALERT_LEVELS = {"failed": "error", "stopped": "warning"}


def stream_foot(run_id: str, text: str, activity: Activity) -> list[Block]:
    """The blocks a stopped stream keeps at its foot: the status message's (its buttons while
    calls wait), a failed or stopped run's ending as an alert."""
    level = ALERT_LEVELS.get(activity.state)
    if level is None:
        return status_blocks(run_id, text, activity.state, batch=activity.batchable)
    return [
        AlertBlock(text=mrkdwn(text), level=level),
        context_block(command_words.run_id_line(run_id)),
    ]
