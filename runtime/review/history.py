"""The calls the audit trail holds, each with what became of it, read as a stream.

A call is one `requested` entry (it asked a person), `auto_approved`, `auto_rejected` or
`grant_used` entry (it asked nobody), or an `approved` entry `via: always` of a call that asked
nobody (an Approve always of its run approved it: `runtime.record.permissions`). What became
of a call that asked is read from the entries that follow with its approval id:
`approved`/`approved_always` once the quorum is met (`approvals` reaches `quorum`), `rejected`,
`expired`; a `stopped` entry of its run stops every call of the run still open. A call still
open when the trail ends is `undecided` (still waiting, or its run failed first).

Streaming: only the calls still open are held, and each call is given as its outcome is read,
so the order is that of the outcomes; a trail of any length costs the memory of its open calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from runtime.audit.arguments import kept_arguments, why_not_kept
from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditEntry

Was = Literal[
    "approved",
    "rejected",
    "answered",
    "expired",
    "auto_approved",
    "auto_rejected",
    "granted",
    "always",
    "stopped",
    "undecided",
]
_ASKED_NOBODY: dict[str, Was] = {
    AuditEvent.AUTO_APPROVED: "auto_approved",
    AuditEvent.AUTO_REJECTED: "auto_rejected",
    AuditEvent.GRANT_USED: "granted",
}
_APPROVALS = (AuditEvent.APPROVED, AuditEvent.APPROVED_ALWAYS)
_RUN_ENDS = (AuditEvent.FINISHED, AuditEvent.FAILED)


@dataclass(kw_only=True, slots=True)
class PastCall:
    run_id: str
    approval_id: str
    call_id: str
    tool: str
    agent: str
    mcp_server: str | None
    channel: str
    requester: str
    digest: str
    at: float
    """When it was asked (the entry's time)."""
    arguments: str | None
    """As the digest was computed from them; None when the trail did not keep them."""
    arguments_note: str | None
    """Why the arguments are missing, in words; None when kept."""
    approvers: tuple[str, ...] | None
    """Who could decide when it was asked (empty: anyone); None: the entry does not say."""
    quorum: int | None
    was: Was = "undecided"
    decided_by: list[str] = field(default_factory=list)
    """The people whose decision made `was`: the approvers counted, who rejected, whose grant
    covered it, who stopped the run."""
    decided_at: float | None = None
    """When `was` was reached (the entry that met the quorum, rejected, expired or stopped);
    None for a call that asked nobody or is undecided."""
    approved_at: dict[str, float] = field(default_factory=dict)
    """For an approved call: when each of `decided_by` approved (`runtime.review.stats` finds
    the quick approvals in it)."""


async def past_calls(
    entries: AsyncIterator[AuditEntry], *, until: float | None = None
) -> AsyncIterator[PastCall]:
    """Every call asked before `until` (seconds since the epoch; None: to the trail's end),
    with its outcome, read from `entries` (oldest first)."""
    book = _OpenCalls()
    async for entry in entries:
        late = until is not None and entry.at >= until
        if late and not book.calls:
            return  # nothing asked in the range is still waiting for its outcome
        for call in book.read(entry, late=late):
            yield call
    for approval_id in list(book.calls):
        yield book.close(approval_id, "undecided", [])


@dataclass
class _OpenCalls:
    """The calls that asked a person and whose outcome is not read yet."""

    calls: dict[str, PastCall] = field(default_factory=dict)
    approvals: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    """Per open call: who approved it so far, and when."""
    of_run: dict[str, dict[str, None]] = field(default_factory=dict)
    """Per run: its open calls in the order asked, so that a run's end finds them without
    scanning every open call."""

    def read(self, entry: AuditEntry, *, late: bool) -> list[PastCall]:
        """The calls `entry` completes."""
        event = entry.event
        if event in _ASKED_NOBODY or event == AuditEvent.REQUESTED:
            return [] if late else self._asked(entry)
        details = entry.details
        if (
            event == AuditEvent.APPROVED
            and details.get("via") == "always"
            and str(details.get("approval_id", "")) not in self.calls
        ):
            return [] if late else self._always(entry)
        if event in (*_APPROVALS, AuditEvent.REJECTED, AuditEvent.ANSWERED, AuditEvent.EXPIRED):
            return self._decided(entry)
        if event == AuditEvent.STOPPED or event in _RUN_ENDS:
            stopper = entry.details.get("user_id")
            was: Was = "stopped" if event == AuditEvent.STOPPED else "undecided"
            who = [str(stopper)] if stopper and was == "stopped" else []
            ended = list(self.of_run.get(entry.run_id, {}))
            return [self.close(approval_id, was, who, at=entry.at) for approval_id in ended]
        return []

    def close(
        self, approval_id: str, was: Was, people: list[str], *, at: float | None = None
    ) -> PastCall:
        call = self.calls.pop(approval_id)
        open_here = self.of_run.get(call.run_id, {})
        open_here.pop(approval_id, None)
        if not open_here:
            self.of_run.pop(call.run_id, None)
        approvals = self.approvals.pop(approval_id, [])
        call.was = was
        call.decided_by = people
        call.decided_at = at if was != "undecided" else None
        if was == "approved":
            call.approved_at = dict(approvals)
        return call

    def _asked(self, entry: AuditEntry) -> list[PastCall]:
        call = _call(entry)
        if entry.event == AuditEvent.REQUESTED:
            self.calls[call.approval_id] = call
            self.of_run.setdefault(call.run_id, {})[call.approval_id] = None
            self.approvals[call.approval_id] = []
            return []
        call.was = _ASKED_NOBODY[entry.event]
        user = entry.details.get("user_id")
        if call.was == "granted" and isinstance(user, str):
            call.decided_by = [user]
        return [call]

    def _always(self, entry: AuditEntry) -> list[PastCall]:
        """A call an Approve always of its run approved without asking anyone."""
        call = _call(entry)
        call.was = "always"
        user = entry.details.get("user_id")
        call.decided_by = [user] if isinstance(user, str) else []
        return [call]

    def _decided(self, entry: AuditEntry) -> list[PastCall]:
        details = entry.details
        approval_id = str(details.get("approval_id", ""))
        if approval_id not in self.calls:
            return []  # asked before the range, or late
        user, at = details.get("user_id"), entry.at
        if entry.event in (AuditEvent.REJECTED, AuditEvent.ANSWERED):
            was: Was = "rejected" if entry.event == AuditEvent.REJECTED else "answered"
            return [self.close(approval_id, was, [str(user)] if user else [], at=at)]
        if entry.event == AuditEvent.EXPIRED:
            return [self.close(approval_id, "expired", [], at=at)]
        approvals = self.approvals[approval_id]
        approvals.append((str(user), at))
        counted, quorum = details.get("approvals"), details.get("quorum")
        if isinstance(counted, int) and isinstance(quorum, int) and counted < quorum:
            return []  # counted towards a quorum not yet met
        people = [person for person, _ in approvals]
        return [self.close(approval_id, "approved", people, at=at)]


def _call(entry: AuditEntry) -> PastCall:
    details = entry.details
    server = details.get("mcp_server")
    approvers = details.get("approvers")
    quorum = details.get("quorum")
    return PastCall(
        run_id=entry.run_id,
        approval_id=_text(details, "approval_id"),
        call_id=_text(details, "call_id"),
        tool=_text(details, "tool"),
        agent=_text(details, "agent"),
        mcp_server=server if isinstance(server, str) and server else None,
        channel=_text(details, "channel"),
        requester=_text(details, "requester"),
        digest=_text(details, "digest"),
        at=entry.at,
        arguments=kept_arguments(details),
        arguments_note=why_not_kept(details),
        approvers=tuple(p for p in approvers.split(",") if p)
        if isinstance(approvers, str)
        else None,
        quorum=quorum if isinstance(quorum, int) else None,
    )


def _text(details: dict[str, Any], key: str) -> str:
    value = details.get(key)
    return value if isinstance(value, str) else ""
