"""The words of `/agent audit`: who decided what, in this channel or for one run. Part of
`bot.words.runs` (whose helpers it uses), kept apart only for size."""

from __future__ import annotations

from collections.abc import Sequence

from bot.words import runs as messages
from runtime.audit import AuditEntry
from runtime.calls import shown_digest

AUDIT_EVENT_WORDS = {
    "started": "started",
    "requested": "requested",
    "auto_approved": "approved by policy",
    "auto_rejected": "rejected by policy",
    "approved": "approved",
    "approved_always": "approved always",
    "rejected": "rejected",
    "answered": "answered instead",
    "expired": "expired: nobody decided in time",
    "denied": "click refused",
    "resumed": "resumed",
    "refused": "not run: changed after approval",
    "executed": "executed",
    "replayed": "not run again: its recorded output was reused",
    "outcome_lost": "outcome lost: asks a person before running again",
    "output_held": "output held for a person",
    "output_released": "output released",
    "output_edited": "output edited and released",
    "output_withheld": "output withheld",
    "granted": "granted",
    "grant_used": "approved by a grant",
    "revoked": "grant revoked",
    "edited": "edited",
    "regated": "moved under a stricter rule by an edit",
    "escalated": "escalated",
    "stopped": "stopped",
    "elicited": "MCP server asked",
    "elicitation_answered": "MCP server's question answered",
    "finished": "finished",
    "failed": "failed",
}
"""Every audit event in words: its code (`grant_used`) is for exports, not for people."""
DENIED_WORDS = {
    "not_an_approver": "not one of its approvers",
    "self_approval": "their own request",
    "outside_workspace": "from outside the workspace",
}
"""Why a click was refused, in words."""
AUDIT_TEXT_CHARS = 200
"""How much of an answer or a note a line of `/agent audit` shows."""


def audit_line(entry: AuditEntry) -> str:
    details = entry.details
    parts = [
        messages.slack_date(entry.at, seconds=True),
        f"*{AUDIT_EVENT_WORDS.get(entry.event, entry.event)}*",
    ]
    if details.get("tool"):
        parts.append(f"`{messages.escape(str(details['tool']))}`")
    if details.get("user_id"):
        parts.append(f"by {messages.user(str(details['user_id']))}")
    reason = details.get("reason")
    if reason and entry.event == "denied":
        parts.append(f"({DENIED_WORDS.get(str(reason), messages.escape(str(reason)))})")
    elif reason and entry.event == "rejected":
        parts.append(f"({messages.escape(str(reason))})")
    said = details.get("answer") if entry.event == "answered" else details.get("note")
    if isinstance(said, str) and said:  # an answer as `AUDIT_ARGS` kept it; an approval's note
        parts.append(f"({messages.escape(said[:AUDIT_TEXT_CHARS])})")
    if entry.event == "elicitation_answered" and details.get("action"):
        parts.append(f"(`{messages.escape(str(details['action']))}`)")
    parts.append(f"run `{entry.run_id}`")
    if details.get("digest"):
        parts.append(f"digest `{shown_digest(str(details['digest']))}`")
    return " ".join(parts)


def audit_listing(entries: Sequence[AuditEntry], title: str) -> str:
    if not entries:
        return "No audit events here yet."
    return f"*Audit: {title}*\n" + "\n".join(audit_line(entry) for entry in entries)


def audit_no_run(run_id: str) -> str:
    return f"No audit events of run `{messages.escape(run_id)}` in this channel."


def audit_last_hour(command: str, entries: Sequence[AuditEntry], older: bool, most: int) -> str:
    """`/agent audit` alone. `older`: the channel has events, none of them this hour's."""
    if not entries:
        if older:
            return (
                "No audit events in this channel in the last hour: "
                f"`{command} audit 20` shows the last 20."
            )
        return "No audit events here yet."
    counted = f"the latest {most}" if len(entries) >= most else f"{len(entries)} events"
    return audit_listing(entries, f"the last hour in this channel ({counted})")
