"""Block Kit for approval cards and their modals, within Slack's size limits."""

from __future__ import annotations

import json

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    InputBlock,
    PlainTextInputElement,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.blocks.call_context import context_blocks, edited_preview_blocks, preview_blocks
from bot.blocks.code import MODAL_BLOCK_LIMIT, SECTION_TEXT_LIMIT, boundary, code_block
from bot.blocks.edits import ARGUMENTS_BLOCK, add_edit_button, change_blocks
from bot.blocks.grants import grant_menu_blocks, granted_blocks
from bot.blocks.held import held_decided_blocks, held_request_blocks, output_modal
from bot.blocks.parts import Block, button, context_block, mrkdwn, plain, section
from bot.words import answers as answer_words
from bot.words import call_text, deciders
from bot.words import held as held_words
from bot.words import runs as messages
from bot.words import verdicts as verdict_words
from bot.words.nested_calls import asked_inside
from runtime.record import PendingCall
from runtime.reporter import RunView

ACTION_APPROVE = "approve"
ACTION_APPROVE_ALWAYS = "approve_always"
ACTION_APPROVE_TYPED = "approve_typed"
"""Approve on a call whose rule has `confirm`: opens the modal that asks for the value."""
ACTION_REJECT = "reject"
ACTION_VIEW_ARGUMENTS = "view_arguments"
ACTION_APPROVE_NOTE = "approve_note"
"""**Approve with a note…**: opens the modal that asks the note (`note_modal`)."""
ACTION_ANSWER = "answer"
"""**Answer instead**: opens the modal that asks the answer (`answer_modal`)."""
REJECT_CALLBACK = "reject_reason"
ANSWER_CALLBACK = "answer_instead"
NOTE_CALLBACK = "approve_note"
REASON_BLOCK = "reason"
REASON_ACTION = "reason_input"
"""The one text input of the reject, answer and note modals."""
DECISION_BLOCK = "decision"
"""The decided card's first block: its outcome."""


def button_value(run_id: str, approval_id: str, digest: str) -> str:
    """Only opaque ids travel in buttons, and the digest of the call as the button shows it:
    everything else is looked up on the server, which refuses a click on a call that changed
    since (`bot.slack.payloads.ApprovalRef`)."""
    return f"{run_id}:{approval_id}:{digest}" if digest else f"{run_id}:{approval_id}"


def pretty_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # both parser and encoder recurse: shown as sent
        return arguments


def arguments_block_text(arguments: str) -> tuple[str, int]:
    """The arguments in a code block (`code_block`), or "No arguments." for a call without
    any, rather than an empty `{}`."""
    if arguments.strip() in ("", "{}"):
        return call_text.NO_ARGUMENTS, len(arguments)
    return code_block(arguments)


def _call_blocks(run: RunView, call: PendingCall, approvers: list[str]) -> tuple[list[Block], bool]:
    arguments = pretty_arguments(call.shown_arguments)
    code, shown = arguments_block_text(arguments)
    requester = run.conversation.requester
    fields = [
        mrkdwn(f"*Requested by*\n{messages.user(requester)}"),
        mrkdwn(f"*Expires*\n{messages.slack_date(call.expires_at)}"),
    ]
    # The requester, an approver who may not approve their own call, may still reject it.
    withdrawer = requester if requester in call.approvers and requester not in approvers else None
    if approvers or withdrawer:
        fields.append(mrkdwn(deciders.approvers_field(approvers, withdrawer)))
    headline = messages.approval_headline(call.agent, call.tool, call.mcp_server)
    if call.lost:
        headline = messages.outcome_lost_headline(call.tool)
    blocks: list[Block] = [section(headline)]
    if call.inside:
        blocks.append(context_block(asked_inside(call.tool, call.agent, call.inside)))
    if call.description:
        blocks.append(context_block(call_text.tool_description(call.description)))
    if call.when or call.rule_name:
        blocks.append(context_block(messages.rule_line(call.when, call.rule_name)))
    if call.unjudged:
        blocks.append(context_block(verdict_words.unjudged_line(call.unjudged)))
    if call.invalid:
        blocks.append(context_block(verdict_words.invalid_line(call.tool, call.invalid)))
    blocks += [
        SectionBlock(fields=fields),
        *context_blocks(run, call),
        section(code, block_id=ARGUMENTS_BLOCK),
        *change_blocks(call),
        *preview_blocks(call),
    ]
    truncated = shown < len(arguments)
    notes = [messages.arguments_shortened(shown, len(arguments))] if truncated else []
    if call.shown_digest:
        notes.append(messages.digest_line(call.shown_digest))
    if notes:
        blocks.append(context_block(" · ".join(notes)))
    return blocks, truncated


def approval_request_blocks(
    run: RunView,
    call: PendingCall,
    approvers: list[str] | None = None,
    channel_name: str | None = None,
) -> list[Block]:
    """The card asking for a decision (also redrawn as approvals towards a quorum come in).
    `approvers`: who may approve it (`SlackReach.approvers_shown`)."""
    if call.held is not None:  # a held output: Release and Withhold (`bot.blocks.held`)
        value = button_value(run.run_id, call.approval_id, call.digest)
        actions = (ACTION_APPROVE, ACTION_ANSWER, ACTION_REJECT, ACTION_VIEW_ARGUMENTS)
        return held_request_blocks(run, call, approvers or [], value, actions)
    blocks, truncated = _call_blocks(run, call, approvers or [])
    value = button_value(run.run_id, call.approval_id, call.shown_digest)
    add_edit_button(blocks, value, call)
    if call.quorum > 1:
        approved_by = [a.user_id for a in call.approvals]
        may_approve = (approvers or []) if call.approvers else None
        blocks.append(
            context_block(deciders.quorum_progress(call.quorum, approved_by, may_approve))
        )
    approve = messages.RUN_AGAIN if call.lost else messages.APPROVE
    # A typed confirmation first opens its modal (bot.listeners.confirmations).
    action = ACTION_APPROVE_TYPED if call.confirm else ACTION_APPROVE
    buttons = [button(action, approve, value, "primary")]
    # A typed confirmation has its own modal: Approve only. A call that may have run is run
    # again or not (a lost call's resume knows only those two).
    if not call.confirm and not call.lost:
        buttons.append(button(ACTION_APPROVE_NOTE, answer_words.APPROVE_WITH_NOTE, value))
    if call.allow_always:
        buttons.append(button(ACTION_APPROVE_ALWAYS, messages.APPROVE_ALWAYS, value))
    buttons.append(button(ACTION_REJECT, messages.REJECT, value, "danger"))
    if call.answer and not call.lost:
        buttons.append(button(ACTION_ANSWER, answer_words.ANSWER_INSTEAD, value))
    if truncated:
        buttons.append(button(ACTION_VIEW_ARGUMENTS, messages.VIEW_ARGUMENTS, value))
    blocks.append(ActionsBlock(block_id="approval", elements=buttons))
    blocks.extend(grant_menu_blocks(run, call, channel_name))
    if call.allow_always:
        blocks.append(context_block(messages.APPROVE_ALWAYS_HINT))
    return blocks


def approval_decided_blocks(run: RunView, call: PendingCall) -> list[Block]:
    """The card once decided, expired or stopped: the outcome first, then what was asked (the
    edited arguments, and what the edit changed, if a person edited them). No decision buttons
    and no expiry; only **View full arguments** when they were shortened; the grant the approval
    made, if any."""
    if call.decision is None:
        raise ValueError(f"approval {call.approval_id} is not decided")
    if call.held is not None:
        return held_decided_blocks(call)
    arguments = pretty_arguments(call.shown_arguments)
    code, shown = arguments_block_text(arguments)
    context = messages.decision_context(
        call.agent, run.conversation.requester, call.decision, call.mcp_server
    )
    blocks: list[Block] = [
        section(
            messages.decision_headline(
                call.decision, call.tool, requester=run.conversation.requester
            ),
            block_id=DECISION_BLOCK,
        ),
        context_block(context),
        section(code),
        *change_blocks(call),
        *edited_preview_blocks(call),
    ]
    said = answer_words.note_lines(call.decision.approvals)
    if said and call.decision.outcome in ("approved", "approved_always"):
        blocks.insert(2, section("\n".join(said)[:SECTION_TEXT_LIMIT]))
    notes = [messages.arguments_shortened(shown, len(arguments))] if shown < len(arguments) else []
    if call.shown_digest:
        notes.append(messages.digest_line(call.shown_digest))
    if notes:
        blocks.append(context_block(" · ".join(notes)))
    if shown < len(arguments):
        # A `str` text: slack_sdk's plain text with `"emoji": true`, as this button always had.
        view = ButtonElement(
            text=messages.VIEW_ARGUMENTS,
            action_id=ACTION_VIEW_ARGUMENTS,
            value=button_value(run.run_id, call.approval_id, call.shown_digest),
        )
        blocks.append(ActionsBlock(block_id="arguments", elements=[view]))
    return [*blocks, *granted_blocks(run, call)]


def reject_modal(call: PendingCall, private_metadata: str, requester: str | None) -> View:
    if call.held is not None:  # **Withhold**: the reason is what the model reads instead
        return _text_modal(
            REJECT_CALLBACK,
            private_metadata,
            (held_words.WITHHOLD_TITLE, held_words.WITHHOLD_SUBMIT, held_words.WITHHOLD_CANCEL),
            held_words.withhold_context(call.tool, requester),
            (held_words.WITHHOLD_LABEL, held_words.WITHHOLD_PLACEHOLDER, 2000),
        )
    return _text_modal(
        REJECT_CALLBACK,
        private_metadata,
        (messages.REJECT_TITLE, messages.REJECT_SUBMIT, messages.REJECT_CANCEL),
        messages.reject_context(call.agent, call.tool, requester),
        (messages.REJECT_LABEL, messages.REJECT_PLACEHOLDER, 2000),
    )


def answer_modal(call: PendingCall, private_metadata: str, requester: str | None) -> View:
    """**Answer instead**: what the model reads as the call's result (the tool does not run);
    for a held output, **Edit and release**."""
    if call.held is not None:  # prefilled with the output, which the edit stands in for
        return _text_modal(
            ANSWER_CALLBACK,
            private_metadata,
            (held_words.EDIT_TITLE, held_words.EDIT_SUBMIT, held_words.EDIT_CANCEL),
            held_words.edit_context(call.tool, requester),
            (held_words.EDIT_LABEL, None, answer_words.ANSWER_CHARS),
            initial=(call.held or "")[: answer_words.ANSWER_CHARS],
        )
    words = answer_words
    return _text_modal(
        ANSWER_CALLBACK,
        private_metadata,
        (words.ANSWER_TITLE, words.ANSWER_SUBMIT, words.ANSWER_CANCEL),
        words.answer_context(call.agent, call.tool, requester),
        (words.ANSWER_LABEL, words.ANSWER_PLACEHOLDER, words.ANSWER_CHARS),
    )


def note_modal(call: PendingCall, private_metadata: str, requester: str | None) -> View:
    """**Approve with a note…**: a short note the model reads after the tool's output."""
    words = answer_words
    return _text_modal(
        NOTE_CALLBACK,
        private_metadata,
        (words.NOTE_TITLE, words.NOTE_SUBMIT, words.NOTE_CANCEL),
        words.note_context(call.agent, call.tool, requester),
        (words.NOTE_LABEL, words.NOTE_PLACEHOLDER, words.NOTE_CHARS),
    )


def _text_modal(
    callback_id: str,
    private_metadata: str,
    buttons: tuple[str, str, str],
    context: str,
    field: tuple[str, str | None, int],
    *,
    initial: str | None = None,
) -> View:
    """A modal opened from a card's button that asks one text: a reason, an answer, a note, an
    edited output (`initial`: the text it starts from)."""
    title, submit, close = buttons
    label, placeholder, most = field
    return View(
        type="modal",
        callback_id=callback_id,
        private_metadata=private_metadata,
        title=plain(title, 24),
        submit=plain(submit, 24),
        close=plain(close, 24),
        blocks=[
            context_block(context),
            InputBlock(
                block_id=REASON_BLOCK,
                label=plain(label, 2000),
                element=PlainTextInputElement(
                    action_id=REASON_ACTION,
                    multiline=True,
                    min_length=1,
                    max_length=most,
                    placeholder=plain(placeholder, 150) if placeholder else None,
                    initial_value=initial,
                ),
            ),
        ],
    )


def arguments_modal(call: PendingCall) -> View:
    """All of a call's arguments, in as many code blocks as a modal holds."""
    if call.held is not None:
        return output_modal(call)
    remaining = pretty_arguments(call.shown_arguments)
    blocks: list[Block] = []
    while remaining and len(blocks) < MODAL_BLOCK_LIMIT - 1:
        _, fits = code_block(remaining)
        end = boundary(remaining, fits)
        code, _ = code_block(remaining[:end])
        blocks.append(section(code))
        # A line break at the end of a block is the break between two blocks.
        remaining = remaining[end + 1 :] if remaining[end : end + 1] == "\n" else remaining[end:]
    notes = []
    if remaining:
        total = len(pretty_arguments(call.shown_arguments))
        notes.append(messages.arguments_shortened(total - len(remaining), total))
    if call.shown_digest:
        notes.append(messages.digest_line(call.shown_digest))
    if notes:
        blocks.append(context_block(" · ".join(notes)))
    return View(
        type="modal",
        title=plain(messages.ARGUMENTS_TITLE, 24),
        close=plain(messages.ARGUMENTS_CLOSE, 24),
        blocks=blocks,
    )
