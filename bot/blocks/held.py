"""Block Kit for the card of a held output (`runtime.journal.held`): the output, shortened, with
**Release** and **Withhold**, and all of it on demand (**View full output**).

Release is the card's Approve, **Edit and release** its Answer instead (the output to edit in
the modal) and Withhold its Reject (with the reason's modal): the same listeners, gate and
decision script, whose digest binds the held output.
"""

from __future__ import annotations

from slack_sdk.models.blocks import ActionsBlock, SectionBlock
from slack_sdk.models.views import View

from bot.blocks.code import code_block, split_points
from bot.blocks.parts import Block, button, context_block, mrkdwn, plain, section
from bot.words import deciders
from bot.words import held as words
from bot.words import runs as messages
from runtime.record import PendingCall
from runtime.reporter import RunView

DECISION_BLOCK = "decision"
"""As `bot.blocks.cards.DECISION_BLOCK`: the decided card's first block, its outcome."""


def held_request_blocks(
    run: RunView,
    call: PendingCall,
    approvers: list[str],
    value: str,
    actions: tuple[str, str, str, str],
) -> list[Block]:
    """The card asking to release or withhold `call.held`; `value` is its buttons' value and
    `actions` the approve, answer (**Edit and release**), reject and view actions' ids."""
    approve, answer, reject, view = actions
    held = call.held or ""
    code, shown = code_block(held)
    fields = [
        mrkdwn(f"*Requested by*\n{messages.user(run.conversation.requester)}"),
        mrkdwn(f"*Expires*\n{messages.slack_date(call.expires_at)}"),
    ]
    if approvers:
        fields.append(mrkdwn(deciders.approvers_field(approvers, None)))
    blocks: list[Block] = [
        section(words.held_headline(call.tool)),
        SectionBlock(fields=fields),
        section(code),
    ]
    notes = [words.output_shortened(shown, len(held))] if shown < len(held) else []
    notes.append(messages.digest_line(call.digest))
    blocks.append(context_block(" · ".join(notes)))
    if call.quorum > 1:
        approved_by = [a.user_id for a in call.approvals]
        may_approve = approvers if call.approvers else None
        blocks.append(
            context_block(deciders.quorum_progress(call.quorum, approved_by, may_approve))
        )
    buttons = [
        button(approve, words.RELEASE, value, "primary"),
        *([button(answer, words.EDIT_AND_RELEASE, value)] if call.answer else []),
        button(reject, words.WITHHOLD, value, "danger"),
    ]
    if shown < len(held):
        buttons.append(button(view, words.VIEW_OUTPUT, value))
    blocks.append(ActionsBlock(block_id="approval", elements=buttons))
    return blocks


def held_decided_blocks(call: PendingCall) -> list[Block]:
    """The card once its output was released, withheld or expired: no buttons; the output
    itself only when released (a withheld one stays where it was shown, not redrawn)."""
    assert call.decision is not None
    headline = words.held_decision_headline(call.decision, call.tool)
    blocks: list[Block] = [section(headline, block_id=DECISION_BLOCK)]
    if call.decision.outcome in ("approved", "approved_always"):
        blocks.append(section(code_block(call.held or "")[0]))
    elif call.decision.outcome == "answered":
        blocks.append(section(code_block(call.decision.answer or "")[0]))
    blocks.append(context_block(messages.digest_line(call.digest)))
    return blocks


def output_modal(call: PendingCall) -> View:
    """All of a held output (as far as the card keeps it), in as many blocks as a modal holds."""
    *codes, left = split_points(call.held or "")
    blocks: list[Block] = [section(code) for code in codes]
    if left:
        total = len(call.held or "")
        blocks.append(context_block(words.output_shortened(total - len(left), total)))
    blocks.append(context_block(messages.digest_line(call.digest)))
    return View(
        type="modal",
        title=plain(words.OUTPUT_TITLE, 24),
        close=plain(messages.ARGUMENTS_CLOSE, 24),
        blocks=blocks,
    )
