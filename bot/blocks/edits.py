"""Block Kit for "Edit, then approve": the card's **Edit** button (beside the arguments), the
modal with the arguments as pretty JSON, and the change an edit made, shown on the card."""

from __future__ import annotations

from slack_sdk.models.blocks import InputBlock, PlainTextInputElement, SectionBlock
from slack_sdk.models.views import View

from bot.blocks.parts import Block, button, context_block, plain
from bot.words import choices as choice_messages
from runtime.decisions import argument_changes, pretty_arguments, schema_checks
from runtime.record import PendingCall

ACTION_EDIT = "edit_arguments"
EDIT_CALLBACK = "edit_arguments"
EDIT_BLOCK = "arguments"
EDIT_ACTION = "arguments_input"
ARGUMENTS_BLOCK = "call_arguments"
"""The card's section that shows the arguments; the Edit button is its accessory."""
INPUT_LIMIT = 3000
"""Slack's longest plain-text input: longer arguments cannot be edited in Slack."""


def editable(call: PendingCall) -> bool:
    """Edit is offered where the policy allows it, the arguments fit Slack's input, the tool's
    schema can be checked, and the tool takes arguments at all (a schema without properties
    leaves nothing to edit)."""
    schema = call.params_schema
    takes_nothing = schema is not None and not schema.get("properties")
    fits = len(pretty_arguments(call.shown_arguments)) <= INPUT_LIMIT
    return call.allow_edit and fits and not takes_nothing and schema_checks(schema)


def add_edit_button(blocks: list[Block], value: str, call: PendingCall) -> None:
    """Put **Edit** beside the arguments of an open card, where the policy allows it; where it
    does but the tool's schema is invalid (no edit could be checked), say so instead."""
    if call.allow_edit and not schema_checks(call.params_schema):
        at = next(
            (n + 1 for n, b in enumerate(blocks) if b.block_id == ARGUMENTS_BLOCK),
            len(blocks),
        )
        blocks.insert(at, context_block(choice_messages.EDIT_SCHEMA_INVALID))
        return
    if not editable(call):
        return
    for block in blocks:
        if isinstance(block, SectionBlock) and block.block_id == ARGUMENTS_BLOCK:
            block.accessory = button(ACTION_EDIT, choice_messages.EDIT, value)


def change_blocks(call: PendingCall) -> list[Block]:
    """What an edit changed (old → new) and who edited; nothing for an unedited call."""
    decided = call.decision is not None and call.decision.edit is not None
    edit = call.decision.edit if call.decision and call.decision.edit else call.edit
    if edit is None:
        return []
    changes = argument_changes(call.arguments, edit.arguments)
    approvers = set()
    if call.decision is not None:
        approvers = {call.decision.user_id, *(a.user_id for a in call.decision.approvals)}
    approved = edit.user_id in approvers
    lines = [choice_messages.edited_line(edit.user_id, decided, approved)]
    lines += [choice_messages.argument_change(c.where, c.old, c.new) for c in changes[:10]]
    return [context_block("\n".join(lines))]


def edit_modal(call: PendingCall, private_metadata: str) -> View:
    return View(
        type="modal",
        callback_id=EDIT_CALLBACK,
        private_metadata=private_metadata,
        title=plain(choice_messages.EDIT_TITLE, 24),
        submit=plain(choice_messages.EDIT_SUBMIT, 24),
        close=plain(choice_messages.EDIT_CANCEL, 24),
        blocks=[
            context_block(choice_messages.edit_context(call.agent, call.tool)),
            InputBlock(
                block_id=EDIT_BLOCK,
                label=plain(choice_messages.EDIT_LABEL, 24),
                element=PlainTextInputElement(
                    action_id=EDIT_ACTION,
                    multiline=True,
                    max_length=INPUT_LIMIT,
                    initial_value=pretty_arguments(call.shown_arguments),
                ),
            ),
        ],
    )
