"""The modal of a typed confirmation: a call whose policy rule has `confirm = "name"` is
approved only by typing that argument's value, as GitHub asks for a repository's name before
deleting it (`bot.listeners.confirmations`)."""

from __future__ import annotations

from slack_sdk.models.blocks import InputBlock, PlainTextInputElement
from slack_sdk.models.views import View

from bot.blocks.parts import context_block, plain
from bot.words import choices as messages
from runtime.record import PendingCall

CONFIRM_CALLBACK = "confirm_typed"
CONFIRM_BLOCK = "confirm"
CONFIRM_ACTION = "confirm_input"


def confirm_modal(call: PendingCall, private_metadata: str) -> View:
    name = call.confirm or ""
    return View(
        type="modal",
        callback_id=CONFIRM_CALLBACK,
        private_metadata=private_metadata,
        title=plain(messages.CONFIRM_TITLE, 24),
        submit=plain(messages.CONFIRM_SUBMIT, 24),
        close=plain(messages.CONFIRM_CANCEL, 24),
        blocks=[
            context_block(messages.confirm_context(call.tool, name)),
            InputBlock(
                block_id=CONFIRM_BLOCK,
                label=plain(messages.confirm_label(name), 2000),
                element=PlainTextInputElement(
                    action_id=CONFIRM_ACTION, min_length=1, max_length=2000
                ),
            ),
        ],
    )
