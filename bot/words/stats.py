"""The words of `/agent stats`: how decisions went in a channel, for the person who asked."""

from __future__ import annotations

from collections import Counter

from bot.words.runs import PRODUCT, escape
from runtime.review import ChannelStats, most, tool_table

STATS_DAYS = 7
"""`/agent stats` alone: the last week."""
STATS_MOST_DAYS = 365
"""`/agent stats N` looks back at most this many days."""

STATS_UNAVAILABLE = (
    f"{PRODUCT} can't read its audit trail right now, so there are no figures. "
    "Please try again in a minute."
)


def _days(days: int) -> str:
    return "the last day" if days == 1 else f"the last {days} days"


def _people(counts: Counter[str], limit: int | None) -> str:
    return ", ".join(f"<@{escape(person)}> {count}" for person, count in most(counts, limit))


def stats_answer(stats: ChannelStats | None, days: int, quick_seconds: float) -> str:
    """The figures of one channel (`stats`; None when nothing asked anyone there)."""
    if stats is None or not stats.tools:
        return f"No tool call asked anyone in this channel in {_days(days)}."
    lines = [
        f"*How decisions went in this channel, {_days(days)}*",
        "```" + "\n".join(escape(line) for line in tool_table(stats)) + "```",
        "Median and p90: from the call asking (its card is posted then) to its approval, "
        "rejection or answer.",
    ]
    if stats.deciders:
        lines.append(f"Decided most: {_people(stats.deciders, 5)}")
    quick = f"Quick approvals (within {quick_seconds:g} s of the card appearing)"
    lines.append(f"{quick}: {_people(stats.quick, None)}" if stats.quick else f"{quick}: none")
    return "\n".join(lines)


def stats_too_long(days: int, command: str) -> str:
    """The trail of `days` is too long to read within Slack's 3 seconds."""
    return (
        f"{_days(days).capitalize()} hold too many audit entries to count in the 3 seconds Slack "
        f"gives an answer. Try fewer days (`{command} stats 1`), or ask whoever runs {PRODUCT} "
        "for `python -m runtime stats --since DATE`, which has no such limit."
    )
