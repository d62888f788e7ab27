"""How a card shows what it quotes of a call: the tool's own description, and arguments that
are none. Part of `bot.words.runs` (whose helpers it uses), kept apart for size."""

from __future__ import annotations

import re

from bot.words.runs import escape

DESCRIPTION_CHARS = 500
NO_ARGUMENTS = "_No arguments._"
"""Where a call's arguments are empty (`{}`): there is nothing to show or edit."""
_DOCSTRING_SECTION = re.compile(
    r"^[ \t]*(?:(?:Args|Arguments|Parameters|Params|Returns|Raises|Yields|Examples?)[ \t]*:"
    r"|(?:Parameters|Returns|Raises|Examples?)[ \t]*\n[ \t]*-{3,})",
    re.IGNORECASE | re.MULTILINE,
)
"""Where a docstring's argument list or other section starts (Google and NumPy style): an MCP
server often lists a tool with its whole docstring, and the card's arguments say the rest."""


def tool_description(description: str) -> str:
    """What the tool says it does (from the MCP server's listing: not our words, so quoted),
    without its docstring's sections (`Args:` …)."""
    found = _DOCSTRING_SECTION.search(description)
    text = " ".join((description[: found.start()] if found else description).split())
    if len(text) > DESCRIPTION_CHARS:
        text = text[:DESCRIPTION_CHARS] + "…"
    return f"_Tool description:_ {escape(text)}"
