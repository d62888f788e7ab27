"""The words of what a card offers beyond yes and no: grants, edits, the task and
the model's reason, and previews. Part of `bot.words.runs`, kept apart only for size."""

from __future__ import annotations

from bot.words.runs import escape, slack_date, user

GRANT_MENU_PLACEHOLDER = "Approve and allow…"
GRANT_MENU_LABEL = (
    "*Fewer cards:* approve this call and let later ones like it run without asking, for a while."
)
OPTION_LIMIT = 75


def duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    if rest == 0 and hours:
        return f"{hours} hour" if hours == 1 else f"{hours} hours"
    minutes = max(1, seconds // 60)
    return f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"


def grant_option(scope: str, seconds: int, tool: str, channel_name: str | None) -> str:
    """A grant on the card's menu, plain text (no Markdown): delete_user in #ops for 1 hour."""
    if scope == "arguments":
        text = f"these exact arguments for {duration(seconds)}"
    else:
        where = f"#{channel_name}" if channel_name else "this channel"
        text = f"{tool} in {where} for {duration(seconds)}"
    return text if len(text) <= OPTION_LIMIT else text[: OPTION_LIMIT - 1] + "…"


def grant_what(tool: str, scope: str, channel: str) -> str:
    if scope == "arguments":
        return f"`{escape(tool)}` with these exact arguments in <#{channel}>"
    return f"`{escape(tool)}` in <#{channel}>"


def granted_line(tool: str, scope: str, channel: str, ends_at: float, user_id: str | None) -> str:
    """On a decided card: the grant its approval made."""
    who = f" by {user(user_id)}" if user_id else ""
    return (
        f":key: Also allowed{who}: {grant_what(tool, scope, channel)} runs without asking "
        f"until {slack_date(ends_at)}."
    )


def grant_used_line(tool: str, user_id: str, ends_at: float) -> str:
    """The quiet line in a thread: a grant approved a call without a card."""
    return f"`{escape(tool)}` approved by {user(user_id)}'s grant (until {slack_date(ends_at)})"


REVOKE = "Revoke"


def grant_revoked(tool: str, scope: str, channel: str) -> str:
    return f"Revoked. {grant_what(tool, scope, channel)} asks a person again from the next call."


def grant_revoked_line(tool: str, granted_by: str, revoked_by: str) -> str:
    return (
        f"`{escape(tool)}` approved by {user(granted_by)}'s grant (revoked by {user(revoked_by)})"
    )


GRANT_GONE = "That grant has already ended or was revoked, so nothing changed."
GRANT_NOT_OFFERED = (
    "That grant is not offered for this call (never under a quorum, and only as long as the "
    "policy allows), so nothing was recorded. Use Approve."
)
NO_GRANTS = "No grants are active in this channel. A card's *Approve and allow…* menu makes one."


def grants_heading(count: int) -> str:
    return f"*Grants active in this channel ({count})*"


def grant_listing(
    tool: str, agent: str, scope: str, granted_by: str, ends_at: float, uses: int
) -> str:
    what = f"`{escape(tool)}` of *{escape(agent)}*"
    if scope == "arguments":
        what += " with one set of arguments"
    times = "once" if uses == 1 else f"{uses} times"
    return f"{what}, granted by {user(granted_by)}, until {slack_date(ends_at)}; used {times}"


# Edit, then approve.
EDIT = "Edit"
EDIT_TITLE = "Edit, then approve"
EDIT_SUBMIT = "Approve edited"
EDIT_CANCEL = "Cancel"
EDIT_LABEL = "Arguments (JSON)"


def edit_under_stricter_rule(when: str | None, approvers: list[str], quorum: int) -> str:
    """An edit whose arguments fall under a stricter rule than the call's (modal error: plain)."""
    rule = f"the rule “{when}”" if when else "a stricter rule"
    if not approvers:
        who = "it is blocked"
    else:
        who = f"{quorum} of {', '.join(approvers)} must approve"
        if quorum == 1:
            who = f"{' or '.join(approvers)} must approve"
    return (
        f"These arguments fall under {rule}: {who}. Nothing was recorded: change them back, or "
        "reject the call and ask for it again."
    )


def edit_regated(
    when: str | None,
    name: str | None,
    mentions: list[str],
    quorum: int,
    *,
    confirm: str | None = None,
) -> str:
    """To the editor, privately: an edit that moved the call under a stricter rule was stored
    but not approved; its card now asks that rule's approvers (`mentions`: none, anyone), and
    whoever approves types its `confirm` argument when the rule asks it."""
    rule = f"the rule *{escape(name)}*" if name else "a stricter rule"
    if when and not name:
        rule = f"the rule `{escape(when)}`"
    if not mentions:
        who = "anyone in the channel may decide it"
    elif quorum == 1:
        who = f"{' or '.join(mentions)} must approve it"
    else:
        who = f"{quorum} of {', '.join(mentions)} must approve it"
    if confirm:
        who += f", typing its `{escape(confirm)}`"
    return (
        f"Your edit was not approved: the edited call falls under {rule}, so {who}. The card "
        "now shows the edited arguments under that rule."
    )


CONFIRM_TITLE = "Confirm the call"
CONFIRM_SUBMIT = "Approve"
CONFIRM_CANCEL = "Cancel"
CONFIRM_NEEDED = (
    "Approving this call needs its value typed: press Approve on the card, type it, and submit. "
    "Nothing was recorded."
)


def confirm_context(tool: str, name: str) -> str:
    return (
        f"The policy asks whoever approves `{escape(tool)}` to type the value of "
        f"`{escape(name)}` exactly, as the card shows it."
    )


def confirm_label(name: str) -> str:
    """The modal's field (plain text)."""
    return f"Type the {name} to approve"


def confirm_wrong(name: str) -> str:
    """The modal's error (plain text)."""
    return f"That is not this call's {name}. Nothing was recorded: type it exactly as shown."


EDIT_NOT_OFFERED = "Editing is not allowed for this call, so nothing was recorded."
EDIT_SCHEMA_INVALID = (
    "_This tool's arguments cannot be edited: its schema is invalid, so an edit could not be "
    "checked._"
)
EDIT_STALE = (
    "Someone changed these arguments after you opened the editor, so nothing was recorded. "
    "Look at the card again."
)


def edit_context(agent: str, tool: str) -> str:
    return (
        f"Change what `{escape(tool)}` runs with, then submit: that approves the edited call. "
        f"*{escape(agent)}* is told what you changed."
    )


def edited_line(user_id: str, decided: bool, approved: bool = True) -> str:
    """`approved`: the editor's approval is among the decision's (not so after an edit that
    moved the call under a stricter rule, which approves nothing)."""
    if decided and not approved:
        return f":pencil2: Edited by {user(user_id)}"
    if decided:
        return f":pencil2: Edited and approved by {user(user_id)}"
    return f":pencil2: Edited by {user(user_id)}; approvals count from this edit"


def argument_change(where: str, old: str, new: str) -> str:
    return f"`{escape(where)}`: `{escape(old)}` → `{escape(new)}`"


# Context and preview.
def task_line(task: str) -> str:
    return f"*Task:* {escape(task)}"


def why_line(why: str) -> str:
    quoted = "\n".join(f">{escape(line)}" for line in why.splitlines() if line.strip())
    return f"*Why:*\n{quoted}"


PREVIEW_BEFORE_EDIT = (
    "*Preview*\n_Not shown: it was made for the arguments before the edit. The edited call's "
    "preview is made just before it runs, and shown here and in the thread._"
)


def edited_preview_section(text: str) -> str:
    """A card's preview once made again for the edited arguments, just before they run."""
    shown = escape(text) if text else "_no preview_"
    return f"*Preview of the edited call*\n{shown}"


def edited_preview_line(tool: str, editor: str | None, text: str) -> str:
    """The thread's line as an edited call is about to run: what its preview says now."""
    shown = escape(text) if text else "_no preview_"
    edited = f"the arguments {user(editor)} edited" if editor else "the edited arguments"
    return f":eyes: `{escape(tool)}` runs now with {edited}. Their preview: {shown}"


def preview_section(text: str) -> str:
    return f"*Preview*\n{escape(text)}" if text else "*Preview*\n_no preview_"
