"""Block Kit parts every card, menu and view here is made of."""

from __future__ import annotations

from typing import Any

Block = dict[str, Any]


def context_block(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def button(action_id: str, text: str, value: str, style: str | None = None) -> Block:
    made: Block = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": value,
    }
    if style:
        made["style"] = style
    return made
