"""Text in Slack code blocks: escaped, never closed early by the text, within Slack's limits."""

from __future__ import annotations

from bot.words import runs as messages

SECTION_TEXT_LIMIT = 3000
MODAL_BLOCK_LIMIT = 100
CODE_FENCE = "```"
ZERO_WIDTH_SPACE = "\u200b"


def code_block(text: str, limit: int = SECTION_TEXT_LIMIT) -> tuple[str, int]:
    """Escaped text in a code block that fits `limit`; also how many source characters fit."""
    budget = limit - 2 * len(CODE_FENCE) - 2
    pieces: list[str] = []
    used = 0
    shown = 0
    previous = ""
    for char in text:
        piece = messages.escape(char) if char in "&<>" else char
        if char == "`" and previous == "`":
            # A fence inside the text would end the block early. With a zero-width space
            # between any two backticks, no run of them (three, five, nine) can form one.
            piece = ZERO_WIDTH_SPACE + char
        previous = char
        if used + len(piece) > budget:
            break
        pieces.append(piece)
        used += len(piece)
        shown += 1
    return f"{CODE_FENCE}\n{''.join(pieces)}\n{CODE_FENCE}", shown


def boundary(text: str, fits: int) -> int:
    """Where to end a block of `text` of which `fits` characters fit: at the last line break,
    else after the last space, in the second half of what fits (a value is not split
    mid-word); at `fits` when there is none, or when all of it fits."""
    if fits >= len(text):
        return fits
    line = text.rfind("\n", fits // 2, fits)
    if line >= 0:
        return line
    space = text.rfind(" ", fits // 2, fits)
    return space + 1 if space >= 0 else fits


def split_points(text: str) -> list[str]:
    """`text` in as many code blocks as a modal holds (all but one block), and what is left."""
    blocks: list[str] = []
    remaining = text
    while remaining and len(blocks) < MODAL_BLOCK_LIMIT - 1:
        _, fits = code_block(remaining)
        end = boundary(remaining, fits)
        blocks.append(code_block(remaining[:end])[0])
        # A line break at the end of a block is the break between two blocks.
        remaining = remaining[end + 1 :] if remaining[end : end + 1] == "\n" else remaining[end:]
    blocks.append(remaining)
    return blocks
