"""The words of a card for a call asked inside an agent used as a tool. Part of `bot.words.runs`
(whose helpers it uses), kept apart only for size."""

from __future__ import annotations

from collections.abc import Sequence

from bot.words import runs as messages


def asked_inside(tool: str, agent: str, inside: Sequence[str]) -> str:
    """ "`get_user_name` asked by *spanish*, inside *ops*": `inside` names the agents that ran
    `agent` as a tool, outermost first; the nearest is named first."""
    callers = ", inside ".join(f"*{messages.escape(name)}*" for name in reversed(inside))
    return f"`{messages.escape(tool)}` asked by *{messages.escape(agent)}*, inside {callers}"
