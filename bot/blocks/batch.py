"""**Approve all** and **Reject all**: the buttons on a waiting run's status
message, and the modal that lists every waiting call, whole, with the digest it will be bound
to (a call it cannot show whole is left out of the batch and decided on its card)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slack_sdk.models.blocks import ButtonElement, InputBlock, PlainTextInputElement
from slack_sdk.models.views import View

from bot.blocks.cards import pretty_arguments
from bot.blocks.code import MODAL_BLOCK_LIMIT, code_block
from bot.blocks.parts import Block, context_block, plain, section
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


@dataclass(frozen=True, slots=True)
class BatchListing:
    """What the modal shows: each call whole (its arguments in as many code blocks as they
    take), and the calls left out because the modal cannot hold them whole."""

    shown: list[tuple[PendingCall, list[str]]]
    """Each call listed, with its arguments' code blocks."""
    left_out: list[PendingCall]

    @property
    def calls(self) -> list[PendingCall]:
        return [call for call, _ in self.shown]


def batch_listing(calls: Sequence[PendingCall], *, approving: bool) -> BatchListing:
    """Which calls the modal can show whole, in order: a person approves only what they can
    read, so a call whose arguments do not fit in what is left of the modal's blocks is left
    out of the batch (and decided on its card), never listed shortened."""
    # The intro, the reason's input (Reject all), the note on the calls left out.
    left = MODAL_BLOCK_LIMIT - 1 - (0 if approving else 1) - 1
    shown: list[tuple[PendingCall, list[str]]] = []
    left_out: list[PendingCall] = []
    for call in calls:
        codes = _code_blocks(call.shown_arguments)
        if 1 + len(codes) <= left:
            shown.append((call, codes))
            left -= 1 + len(codes)
        else:
            left_out.append(call)
    return BatchListing(shown=shown, left_out=left_out)


def _code_blocks(arguments: str) -> list[str]:
    """The arguments, pretty, in code blocks of a section's size, all of them."""
    remaining = pretty_arguments(arguments)
    codes = []
    while remaining:
        code, shown = code_block(remaining)
        codes.append(code)
        remaining = remaining[shown:]
    return codes or [code_block("")[0]]


def batch_modal(listing: BatchListing, private_metadata: str, *, approving: bool) -> View:
    """Every call of `listing`, each whole: its tool, its full digest, all its arguments, as
    the submission binds them; then why any call is left out."""
    count = len(listing.shown)
    blocks: list[Block] = [section(words.intro(count, approving))]
    for call, codes in listing.shown:
        blocks.append(section(words.call_header(call.tool, call.shown_digest)))
        blocks.extend(section(code) for code in codes)
    if listing.left_out:
        tools = [call.tool for call in listing.left_out]
        blocks.append(context_block(words.left_out(tools)))
    if not approving:
        reason = PlainTextInputElement(
            action_id=REASON_ACTION,
            multiline=True,
            min_length=1,
            max_length=2000,
            placeholder=plain(words.REJECT_ALL_PLACEHOLDER),
        )
        label = plain(words.REJECT_ALL_LABEL)
        blocks.append(InputBlock(block_id=REASON_BLOCK, label=label, element=reason))
    return View(
        type="modal",
        callback_id=BATCH_CALLBACK,
        private_metadata=private_metadata,
        title=plain(words.APPROVE_ALL_TITLE if approving else words.REJECT_ALL_TITLE, 24),
        submit=plain(words.APPROVE_ALL_SUBMIT if approving else words.REJECT_ALL_SUBMIT, 24),
        close=plain(words.CANCEL, 24),
        blocks=blocks,
    )
