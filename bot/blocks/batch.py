"""**Approve all** and **Reject all** (issue 20 item 2): the buttons on a waiting run's status
message, and the modal that lists every waiting call with the digest it will be bound to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slack_sdk.models.blocks import ButtonElement

from bot.words import batch as words
from runtime.record import PendingCall

ACTION_APPROVE_ALL = "approve_all"
ACTION_REJECT_ALL = "reject_all"
BATCH_CALLBACK = "batch_decision"
REASON_BLOCK = "batch_reason"
REASON_ACTION = "batch_reason_input"


def batch_buttons(run_id: str) -> list[ButtonElement]:
    """Offered beside **Stop** while two or more calls wait and none needs a quorum or a typed
    confirmation (`Activity.batchable`)."""
    return [
        ButtonElement(
            text=words.APPROVE_ALL, action_id=ACTION_APPROVE_ALL, value=run_id, style="primary"
        ),
        ButtonElement(text=words.REJECT_ALL, action_id=ACTION_REJECT_ALL, value=run_id),
    ]


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text[:24]}


def batch_modal(
    calls: Sequence[PendingCall], private_metadata: str, *, approving: bool
) -> dict[str, Any]:
    """Every waiting call (tool, arguments shortened, digest), as the submission binds them."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": words.intro(len(calls), approving)}}
    ]
    for call in calls:
        line = words.call_line(call.tool, call.shown_arguments, call.shown_digest)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": line}})
    if not approving:
        blocks.append(
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "label": {"type": "plain_text", "text": words.REJECT_ALL_LABEL},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_ACTION,
                    "multiline": True,
                    "min_length": 1,
                    "max_length": 2000,
                    "placeholder": {"type": "plain_text", "text": words.REJECT_ALL_PLACEHOLDER},
                },
            }
        )
    return {
        "type": "modal",
        "callback_id": BATCH_CALLBACK,
        "private_metadata": private_metadata,
        "title": _plain(words.APPROVE_ALL_TITLE if approving else words.REJECT_ALL_TITLE),
        "submit": _plain(words.APPROVE_ALL_SUBMIT if approving else words.REJECT_ALL_SUBMIT),
        "close": _plain(words.CANCEL),
        "blocks": blocks,
    }
