"""The words for people outside the installing workspace (issue 18): why they were refused.
Part of `bot.words.runs`, kept apart only for size."""

from __future__ import annotations

OUTSIDE_WORKSPACE = (
    ":no_entry: Only full members of this workspace may approve, reject, grant, stop or revoke "
    "here, and Slack says you are a guest or from another organisation, so nothing was recorded."
)
STANDING_UNKNOWN = (
    "Slack did not tell Countersign whether you are a member of this workspace just now, so "
    "nothing was recorded. Please try again in a few seconds."
)
