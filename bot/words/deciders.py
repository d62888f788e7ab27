"""Who may decide a call, in words: on its card ("Who may decide", a quorum's count), the Home
tab and escalations. Part of `bot.words.runs` (whose helpers it uses), kept apart for size."""

from __future__ import annotations

from collections.abc import Sequence

from bot.words.runs import and_list, names_list, user
from runtime.deciders import is_group


def mention(principal: str) -> str:
    """A person, a user group or a channel, as Slack shows (and notifies) it."""
    if is_group(principal):
        return f"<!subteam^{principal}>"
    if principal.startswith(("C", "G")):
        return f"<#{principal}>"
    return user(principal)


def quorum_progress(quorum: int, approved: Sequence[str], may_approve: Sequence[str] | None) -> str:
    """Who approved and who still may: "1 of 2 approvals: @alice approved; @bob or @carol can
    approve". `may_approve`: the call's approvers but its requester (None: anyone in the
    channel)."""
    line = f":busts_in_silhouette: {len(approved)} of {quorum} approvals"
    parts = [f"{and_list([user(a) for a in approved])} approved"] if approved else []
    if may_approve is None:
        parts.append("anyone else in the channel can approve")
    elif still := [mention(p) for p in may_approve if p not in approved]:
        parts.append(f"{names_list(still)} can approve")
    return f"{line}: {'; '.join(parts)}" if parts else line


def approvers_field(approvers: Sequence[str], withdrawer: str | None = None) -> str:
    """Who may decide, mentioned so that Slack draws each person and group; `withdrawer`: the
    requester, who may not approve their own call but may still reject it."""
    lines = [", ".join(mention(p) for p in approvers)] if approvers else []
    if withdrawer:
        lines.append(f"{user(withdrawer)} (who asked) may only withdraw it")
    return "*Who may decide*\n" + "\n".join(lines)
