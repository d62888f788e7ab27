"""The words of a run's streamed message: the model's text as it comes, one line per tool call
of a stretch (a task), and the line left on a stretch's message once the run has gone on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.words.runs import escape
from runtime.reporter import Task

STRETCH_SETTLED = "Decided; the run went on below."
CARD_LINK = "Its card"
"""The text of a task's link to the card that asked people to decide it."""
MOVED_ON = "\n\n_This run moved on to another worker; its progress continues below._"
TITLE_LIMIT = 250
SAID_LIMIT = 11_000
"""Characters of the model's text a status message shows (the tail) when a stream went on as
an ordinary message: a `markdown` block holds 12,000, with the status beside it."""


def streamed_text(text: str) -> str:
    """The model's text, as streamed: Markdown, escaped so it cannot ping or link."""
    return escape(text)


def said_so_far(text: str) -> str:
    """The model's text of a stretch on a message that no longer streams (its tail)."""
    text = text.strip()
    shown = escape(text)
    while len(shown) > SAID_LIMIT:  # escaping lengthens: cut until it fits
        text = text[-(SAID_LIMIT * len(text) // len(shown)) + 1 :]
        shown = "…" + escape(text)
    return shown


def task_title(task: Task, names: Mapping[str, str]) -> str:
    """A task's title (plain text: no mentions), e.g. "Waiting for approval: delete_user,
    @alice or @bob can decide"."""
    if task.state != "waiting":
        return task.tool[:TITLE_LIMIT]
    if not task.deciders:
        who = "anyone in the channel can decide"
    else:
        people = [_at(names.get(p, p)) for p in task.deciders]
        either = ", ".join(people[:-1]) + " or " + people[-1] if len(people) > 1 else people[0]
        who = f"{either} can decide"
    return f"Waiting for approval: {task.tool}, {who}"[:TITLE_LIMIT]


def task_outcome(task: Task, names: Mapping[str, str]) -> str | None:
    """How a task ended, in one line (None: nothing to say)."""
    kind, _, who = task.note.partition(":")
    name = _at(names.get(who, who)) if who else "someone"
    if kind == "approved":
        return f"Approved by {name}"
    if kind == "rejected":
        return f"Rejected by {name}: {task.reason}" if task.reason else f"Rejected by {name}"
    if kind == "stopped":
        return f"Stopped by {name}" if who else "Stopped"
    return {
        "expired": "Expired: nobody decided in time",
        "policy": "Not allowed by the policy",
        "failed": "The run failed before it ended",
    }.get(kind)


def _at(name: str) -> str:
    return name if name.startswith("@") else f"@{name}"


def stretch_settled(
    tasks: Sequence[Task], names: Mapping[str, str], links: Mapping[str, str]
) -> str:
    """The previous stretch's message once its calls are decided: how each ended, with a link
    to its card (`links`: task id -> the card's permalink), and that the run went on below."""
    lines = []
    for task in tasks:
        outcome = task_outcome(task, names)
        if outcome is None:
            continue
        link = links.get(task.id)
        card = f" (<{link}|{CARD_LINK.lower()}>)" if link else ""
        lines.append(f"• `{escape(task.tool)}`: {escape(outcome)}{card}")
    return "\n".join([*lines, STRETCH_SETTLED])
