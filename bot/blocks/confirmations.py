"""The modal of a typed confirmation: a call whose policy rule has `confirm = "name"` is
approved only by typing that argument's value, as GitHub asks for a repository's name before
deleting it (`bot.listeners.confirmations`)."""

from __future__ import annotations

from typing import Any

from bot.blocks.parts import context_block
from bot.words import choices as messages
from runtime.record import PendingCall

CONFIRM_CALLBACK = "confirm_typed"
CONFIRM_BLOCK = "confirm"
CONFIRM_ACTION = "confirm_input"

Block = dict[str, Any]


def _plain(text: str, limit: int) -> Block:
    return {"type": "plain_text", "text": text[:limit]}


def confirm_modal(call: PendingCall, private_metadata: str) -> Block:
    name = call.confirm or ""
    return {
        "type": "modal",
        "callback_id": CONFIRM_CALLBACK,
        "private_metadata": private_metadata,
        "title": _plain(messages.CONFIRM_TITLE, 24),
        "submit": _plain(messages.CONFIRM_SUBMIT, 24),
        "close": _plain(messages.CONFIRM_CANCEL, 24),
        "blocks": [
            context_block(messages.confirm_context(call.tool, name)),
            {
                "type": "input",
                "block_id": CONFIRM_BLOCK,
                "label": _plain(messages.confirm_label(name), 2000),
                "element": {
                    "type": "plain_text_input",
                    "action_id": CONFIRM_ACTION,
                    "min_length": 1,
                    "max_length": 2000,
                },
            },
        ],
    }
