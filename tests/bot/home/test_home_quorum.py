"""A quorum's line on the Home tab names who may still approve as the card does: the requester
among them only where self-approval is allowed (`ALLOW_SELF_APPROVAL`, kept in the call's gate)."""

from __future__ import annotations

from bot.home.blocks import WaitingCall, home_view
from tests.bot.blocks.test_blocks_rendered import RUN, call


def quorum_line(self_ok: bool) -> str:
    requester = RUN.conversation.requester
    waiting = WaitingCall(
        run=RUN,
        call=call(approvers=(requester, "UBOB"), quorum=2),
        link=None,
        self_ok=self_ok,
    )
    view = home_view([waiting], []).to_dict()
    texts = [
        element["text"]
        for block in view["blocks"]
        if block["type"] == "context"
        for element in block["elements"]
    ]
    [line] = [t for t in texts if "approvals" in t]
    return str(line).split("approvals: ", 1)[1]


def test_the_requester_may_approve_where_self_approval_is_allowed() -> None:
    requester = RUN.conversation.requester
    assert f"<@{requester}> or <@UBOB> can approve" in quorum_line(self_ok=True)


def test_the_requester_is_not_named_where_it_is_not() -> None:
    assert quorum_line(self_ok=False).startswith("<@UBOB> can approve")
