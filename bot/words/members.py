"""The words for who is in: people outside the installing workspace, and people outside
the channel of a call that anyone there may decide, clicking on the Home tab. Part of
`bot.words.runs`, kept apart only for size."""

from __future__ import annotations

from bot.words.runs import escape

OUTSIDE_WORKSPACE = (
    ":no_entry: Only full members of this workspace may approve, reject, grant, stop or revoke "
    "here, and Slack says you are a guest or from another organisation, so nothing was recorded."
)
STANDING_UNKNOWN = (
    "Slack did not tell Countersign whether you are a member of this workspace just now, so "
    "nothing was recorded. Please try again in a few seconds."
)
OUTSIDE_REQUESTER = (
    ":no_entry: Only full members of this workspace may start a run here, and Slack says you are "
    "a guest or from another organisation, so nothing was started."
)
"""To a guest or a person of another organisation who asks for a run (`EXTERNAL_REQUESTERS`)."""
REQUESTER_UNKNOWN = (
    "Slack did not tell Countersign whether you are a member of this workspace just now, so "
    "nothing was started. Please try again in a few seconds."
)
OTHER_WORKSPACE = (
    "This Countersign serves another Slack workspace or organisation, so nothing was started "
    "or recorded here."
)
"""To a slash command of another installation of the same app (`bot.web.installation`)."""
INSTALLATION_UNKNOWN = (
    "Slack did not tell Countersign which workspace it is installed in just now, so nothing was "
    "started. Please try again in a few seconds."
)
CHANNEL_UNAVAILABLE = (
    "Slack did not tell Countersign who is in this call's channel just now, so nothing was "
    "recorded. Please try again in a few seconds, or decide on the card in the channel."
)


def not_in_channel(channel: str, tool: str) -> str:
    """A call anyone in `channel` may decide, decided from the Home tab by someone Slack does
    not list there."""
    return (
        f"Only people in <#{channel}> may decide `{escape(tool)}`, and Slack does not list you "
        "there, so nothing was recorded."
    )
