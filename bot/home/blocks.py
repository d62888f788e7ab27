"""Block Kit for the app's Home tab: what waits for the person, and their live runs."""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.models.blocks import ActionsBlock, DividerBlock, HeaderBlock
from slack_sdk.models.views import View

from bot.blocks.cards import button_value
from bot.blocks.parts import Block, button, context_block, plain, section
from bot.words import answers as answer_words
from bot.words import deciders
from bot.words import overviews as words
from bot.words import runs as messages
from runtime.deciders import may_approve
from runtime.record import PendingCall
from runtime.reporter import RunView
from runtime.runs import LiveRun

ACTION_HOME_APPROVE = "home_approve"
ACTION_HOME_APPROVE_ALWAYS = "home_approve_always"
ACTION_HOME_REJECT = "home_reject"
ACTION_HOME_APPROVE_NOTE = "home_approve_note"
ACTION_HOME_STOP = "home_stop"
ACTION_HOME_VIEW_ARGUMENTS = "home_view_arguments"
WAITING_SHOWN = 20
"""Approvals on the tab (3 blocks each: a Home tab holds 100 blocks)."""
RUNS_SHOWN = 15


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitingCall:
    run: RunView
    call: PendingCall
    link: str | None
    self_ok: bool = False
    """The requester may approve their own call (`ALLOW_SELF_APPROVAL`, kept in its gate)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OwnRun:
    run: LiveRun
    link: str | None


def home_view(
    waiting: list[WaitingCall],
    runs: list[OwnRun],
    *,
    more_waiting: int = 0,
    about: bool = False,
    more_runs: int = 0,
) -> View:
    blocks: list[Block] = [_header(words.HOME_WAITING)]
    if not waiting:
        blocks.append(context_block(words.HOME_NOTHING_WAITING))
    for item in waiting[:WAITING_SHOWN]:
        blocks += _waiting(item)
    if more_waiting:
        blocks.append(context_block(words.home_more(more_waiting, about=about)))
    blocks += [DividerBlock(), _header(words.HOME_YOUR_RUNS)]
    if not runs:
        blocks.append(context_block(words.HOME_NO_RUNS))
    for own in runs[:RUNS_SHOWN]:
        blocks.append(_own_run(own))
    if more := max(more_runs, len(runs) - RUNS_SHOWN):
        blocks.append(context_block(words.home_more(more)))
    return View(type="home", blocks=blocks)


def _waiting(item: WaitingCall) -> list[Block]:
    run, call = item.run, item.call
    progress = None
    if call.quorum > 1:
        approved = [a.user_id for a in call.approvals]
        requester = run.conversation.requester
        others = (
            list(may_approve(call.approvers, requester=requester, self_ok=item.self_ok))
            if call.approvers
            else None
        )
        progress = deciders.quorum_progress(call.quorum, approved, others)
    value = button_value(run.run_id, call.approval_id, call.shown_digest)
    buttons = [button(ACTION_HOME_APPROVE, messages.APPROVE, value, "primary")]
    if not call.confirm:  # as on the card: a typed confirmation has its own modal
        buttons.append(button(ACTION_HOME_APPROVE_NOTE, answer_words.APPROVE_WITH_NOTE, value))
    if call.allow_always:
        buttons.append(button(ACTION_HOME_APPROVE_ALWAYS, messages.APPROVE_ALWAYS, value))
    buttons.append(button(ACTION_HOME_REJECT, messages.REJECT, value, "danger"))
    if not words.home_shows_all(call.shown_arguments):
        buttons.append(button(ACTION_HOME_VIEW_ARGUMENTS, messages.VIEW_ARGUMENTS, value))
    context = words.home_call_context(
        run.conversation.requester,
        run.card_channel(call),  # a run asked for in a direct message: the approvers' channel
        item.link,
        call.expires_at,
        progress,
    )
    if call.shown_digest:
        context = f"{context} · {messages.digest_line(call.shown_digest)}"
    return [
        section(words.home_call(call.agent, call.tool, call.shown_arguments)[:3000]),
        context_block(context),
        ActionsBlock(block_id=f"home:{call.approval_id}", elements=buttons),
    ]


def _own_run(own: OwnRun) -> Block:
    stop = None
    if own.run.state != "stopping":
        stop = button(ACTION_HOME_STOP, messages.STOP, own.run.run_id, "danger")
    return section(words.home_run(own.run, own.link)[:3000], accessory=stop)


def _header(text: str) -> Block:
    return HeaderBlock(text=plain(text, 150))
