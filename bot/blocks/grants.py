"""Block Kit for grants: the card's "Approve and allow…" menu, the quiet line a grant leaves in a
thread, a decided card's note of the grant it made, and the `/agent grants` listing."""

from __future__ import annotations

from slack_sdk.models.blocks import ActionsBlock, ButtonElement, Option, StaticSelectElement

from bot.blocks.parts import Block, button, context_block, plain, section
from bot.words import choices as choice_messages
from runtime.grants import GRANT_CHOICES, Grant
from runtime.record import PendingCall
from runtime.reporter import RunView

TEXT_LIMIT = 75
"""An option's text, a button's: Slack's limit."""

ACTION_GRANT = "approve_with_grant"
ACTION_REVOKE_GRANT = "revoke_grant"
GRANT_MENU_BLOCK = "grant_menu"
GRANT_USED_BLOCK = "grant_used"
"""The quiet line's buttons (a revoke from anywhere redraws every line of the grant)."""
GRANT_LIST_BLOCK = "grant_list"


def grant_value(run_id: str, approval_id: str, scope: str, seconds: int, digest: str) -> str:
    """`<run id>:<approval id>:<scope>:<seconds>:<digest>`: the digest of the call as the menu
    showed it, refused once the call changed (as a button's, `bot.slack.payloads.ApprovalRef`)."""
    return f"{run_id}:{approval_id}:{scope}:{seconds}:{digest}"


def grant_menu_blocks(run: RunView, call: PendingCall, channel_name: str | None) -> list[Block]:
    """The grants this call's rule allows, in one menu; none under a quorum or where the policy
    allows none."""
    if call.quorum > 1 or call.grant_max_seconds <= 0:
        return []
    options = [
        Option(
            text=plain(
                choice_messages.grant_option(scope, seconds, call.tool, channel_name), TEXT_LIMIT
            ),
            value=grant_value(run.run_id, call.approval_id, scope, seconds, call.shown_digest),
        )
        for scope, seconds in GRANT_CHOICES
        if seconds <= call.grant_max_seconds
    ]
    if not options:
        return []
    menu = StaticSelectElement(
        action_id=ACTION_GRANT,
        placeholder=plain(choice_messages.GRANT_MENU_PLACEHOLDER, TEXT_LIMIT),
        options=options,
    )
    return [section(choice_messages.GRANT_MENU_LABEL, block_id=GRANT_MENU_BLOCK, accessory=menu)]


def granted_blocks(run: RunView, call: PendingCall) -> list[Block]:
    """On a decided card: the grant its approval made."""
    granted = call.decision.granted if call.decision else None
    if granted is None:
        return []
    text = choice_messages.granted_line(
        call.tool, granted.scope, run.conversation.channel, granted.ends_at, granted.user_id
    )
    return [context_block(text)]


def grant_used_blocks(text: str, grant_id: str) -> list[Block]:
    return [section(text), ActionsBlock(block_id=GRANT_USED_BLOCK, elements=[_revoke(grant_id)])]


def grants_listing_blocks(grants: list[Grant]) -> list[Block]:
    blocks: list[Block] = [section(choice_messages.grants_heading(len(grants)))]
    for grant in grants[:45]:  # Slack's 50 blocks per message
        line = choice_messages.grant_listing(
            grant.tool, grant.agent, grant.scope, grant.user_id, grant.ends_at, grant.uses
        )
        blocks.append(section(line, accessory=_revoke(grant.id)))
    return blocks


def _revoke(grant_id: str) -> ButtonElement:
    return button(ACTION_REVOKE_GRANT, choice_messages.REVOKE[:TEXT_LIMIT], grant_id)
