"""Block Kit for grants: the card's "Approve and allow…" menu, the quiet line a grant leaves in a
thread, a decided card's note of the grant it made, and the `/agent grants` listing."""

from __future__ import annotations

from typing import Any

from bot.blocks.parts import context_block
from bot.words import choices as choice_messages
from runtime.grants import GRANT_CHOICES, Grant
from runtime.record import PendingCall
from runtime.reporter import RunView

Block = dict[str, Any]

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
        {
            "text": _plain(choice_messages.grant_option(scope, seconds, call.tool, channel_name)),
            "value": grant_value(run.run_id, call.approval_id, scope, seconds, call.shown_digest),
        }
        for scope, seconds in GRANT_CHOICES
        if seconds <= call.grant_max_seconds
    ]
    if not options:
        return []
    menu = {
        "type": "static_select",
        "action_id": ACTION_GRANT,
        "placeholder": _plain(choice_messages.GRANT_MENU_PLACEHOLDER),
        "options": options,
    }
    text = {"type": "mrkdwn", "text": choice_messages.GRANT_MENU_LABEL}
    return [{"type": "section", "block_id": GRANT_MENU_BLOCK, "text": text, "accessory": menu}]


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
    return [
        _section(text),
        {
            "type": "actions",
            "block_id": GRANT_USED_BLOCK,
            "elements": [_revoke(grant_id)],
        },
    ]


def grants_listing_blocks(grants: list[Grant]) -> list[Block]:
    blocks: list[Block] = [_section(choice_messages.grants_heading(len(grants)))]
    for grant in grants[:45]:  # Slack's 50 blocks per message
        line = choice_messages.grant_listing(
            grant.tool, grant.agent, grant.scope, grant.user_id, grant.ends_at, grant.uses
        )
        blocks.append({**_section(line), "accessory": _revoke(grant.id)})
    return blocks


def _revoke(grant_id: str) -> Block:
    return {
        "type": "button",
        "action_id": ACTION_REVOKE_GRANT,
        "text": _plain(choice_messages.REVOKE),
        "value": grant_id,
    }


def _section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _plain(text: str) -> Block:
    return {"type": "plain_text", "text": text[:75]}
