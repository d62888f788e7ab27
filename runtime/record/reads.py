"""Every way the run record is read: how each field is parsed, and one view per reader.

The field names are `runtime.record.layout`'s; how a stored value becomes a typed one is said
once, below, and each view (`runtime.record.view.Shape`) names the fields its reader needs, so
that a read asks for those and nothing more. A value another version wrote and this one cannot
read is None where a reader goes on without it (a gate, a call's reach, its copies), and raises
where the reader must not (a decision, an edit).
"""

from __future__ import annotations

import json

from pydantic import TypeAdapter, ValidationError

from runtime.record import layout as rr
from runtime.record.choices import ArgumentEdit
from runtime.record.envelope import Approval, CardCopy, Decision
from runtime.record.layout import CallGate
from runtime.record.permissions import parse_permissions, parse_rule_keys
from runtime.record.reach import CallReach
from runtime.record.stop_mark import StopMark
from runtime.record.view import Envelope, Every, Field, Present, Shape

# --- how a field's value is parsed -----------------------------------------------------------


def text(raw: bytes) -> str:
    return raw.decode()


def integer(raw: bytes) -> int | None:
    """A count, a fence or a round; an emptied one (a start mark taken back) is None."""
    return int(raw) if raw else None


def number(raw: bytes) -> float | None:
    return float(raw) if raw else None


def stored(raw: bytes) -> bytes:
    """As stored: a journal entry, or a gate to compare and set."""
    return raw


def there(_raw: bytes) -> bool:
    return True


def steps(raw: bytes) -> tuple[str, ...]:
    return tuple(json.loads(raw or b"[]"))


def parse_gate(raw: bytes) -> CallGate | None:
    """None when another version wrote it (the decision script refuses such a call)."""
    try:
        return CallGate.model_validate_json(raw)
    except ValidationError:
        return None


def gate_tool(raw: bytes) -> str:
    """The tool a gate is for, from any version's gate; "" when it does not say."""
    try:
        tool = json.loads(raw).get("tool")
    except (ValueError, AttributeError):
        return ""
    return tool if isinstance(tool, str) else ""


def parse_reach(raw: bytes) -> CallReach | None:
    """None when absent or another version's: its reminders and copies are its own."""
    try:
        return CallReach.model_validate_json(raw) if raw else None
    except ValidationError:
        return None


_COPIES = TypeAdapter(tuple[CardCopy, ...])


def parse_copies(raw: bytes | str | None) -> tuple[CardCopy, ...]:
    """The copies recorded for a call; none if absent or unreadable."""
    if not raw:
        return ()
    try:
        return _COPIES.validate_json(raw)
    except ValidationError:
        return ()


def parse_decision(raw: bytes) -> Decision | None:
    return Decision.model_validate_json(raw) if raw else None


def parse_approvals(raw: bytes) -> tuple[Approval, ...]:
    return tuple(Approval.model_validate(item) for item in json.loads(raw)) if raw else ()


def parse_edit(raw: bytes) -> ArgumentEdit | None:
    return ArgumentEdit.model_validate_json(raw) if raw else None


def parse_stop_mark(raw: bytes) -> StopMark:
    return StopMark.model_validate_json(raw)


# --- the views -------------------------------------------------------------------------------


class Whole(Shape):
    """The whole hash (`read_whole`): the worker's load, a stop, a waiting run's status."""

    envelope = Envelope(rr.ENVELOPE)
    readable_envelope = Envelope(rr.ENVELOPE, readable=True)
    status = Field(rr.STATUS, text)
    state = Field(rr.STATE, stored)
    """Compressed (zlib) SDK state."""
    requester = Field(rr.REQUESTER, text)
    status_message = Field(rr.STATUS_MESSAGE, text)
    status_steps = Field(rr.STATUS_STEPS, steps)
    final = Field(rr.FINAL, text)
    message_ts = Every(rr.TS, text)
    decisions = Every(rr.DECISION, parse_decision)
    decided = Every(rr.DECISION, there)
    """Whether each call is decided, whatever version wrote the decision."""
    approvals = Every(rr.APPROVALS, parse_approvals)
    edits = Every(rr.EDIT, parse_edit)
    copies = Every(rr.COPIES, parse_copies)
    gates = Every(rr.GATE, parse_gate)
    journal = Every(rr.JOURNAL, stored)
    turns = Every(rr.TURN, there)
    always = Field(rr.ALWAYS, parse_permissions)
    rule_keys = Field(rr.RULES, parse_rule_keys)


class CallRead(Shape):
    """One call as a decision needs it, without the run's state."""

    envelope = Envelope(rr.ENVELOPE, readable=True)
    exists = Present(rr.ENVELOPE)
    round = Field(rr.ROUND, text)
    gate = Field(rr.GATE, parse_gate)
    message_ts = Field(rr.TS, text)
    copies = Field(rr.COPIES, parse_copies)
    edit = Field(rr.EDIT, parse_edit)


class Place(Shape):
    """Where the run talks, readable by any version."""

    channel = Field(rr.CHANNEL, text)
    requester = Field(rr.REQUESTER, text)
    thread = Field(rr.THREAD, text)
    reply_url = Field(rr.REPLY_URL, text)


class Owner(Shape):
    """Whose run it is and where: enough to choose among live runs."""

    channel = Field(rr.CHANNEL, text)
    requester = Field(rr.REQUESTER, text)


class Requester(Shape):
    requester = Field(rr.REQUESTER, text)


class LiveRead(Shape):
    """A live run as `/agent status` and the Home tab list it."""

    envelope = Envelope(rr.ENVELOPE, readable=True)
    status = Field(rr.STATUS, text)
    pending = Field(rr.PENDING, integer)
    channel = Field(rr.CHANNEL, text)
    requester = Field(rr.REQUESTER, text)
    thread = Field(rr.THREAD, text)
    stopped = Present(rr.STOPPED)
    always = Field(rr.ALWAYS, parse_permissions)


class QuorumRead(Shape):
    """One call under a quorum: the approvals counted so far, and whether it is decided."""

    approvals = Field(rr.APPROVALS, parse_approvals)
    decided = Present(rr.DECISION)


class OpenRead(Shape):
    """One call of an open approval, as the Home tab lists it."""

    status = Field(rr.STATUS, text)
    gate = Field(rr.GATE, parse_gate)
    decided = Present(rr.DECISION)
    has_reach = Present(rr.REACH)
    reach = Field(rr.REACH, parse_reach)
    copies = Field(rr.COPIES, parse_copies)
    deadline = Field(rr.DEADLINE, number)


class PendingRead(Shape):
    """One call of the deadlines due set, as the gauges count it."""

    tool = Field(rr.GATE, gate_tool)
    decided = Present(rr.DECISION)


class Nudges(Shape):
    """One call's reminders and escalation: planned, who may decide now, done until when."""

    reach = Field(rr.REACH, parse_reach)
    has_reach = Present(rr.REACH)
    gate = Field(rr.GATE, parse_gate)
    nudged = Field(rr.NUDGED, number)


class GateRead(Shape):
    """One call's gate, as stored (to compare and set) and parsed."""

    written = Field(rr.GATE, stored)
    gate = Field(rr.GATE, parse_gate)


class CopiesRead(Shape):
    """Whether a call's copies are still to be sent."""

    reach = Field(rr.REACH, parse_reach)
    has_copies = Present(rr.COPIES)


class JournalRead(Shape):
    """One tool call's recorded outcome, whether this delivery may still run it, and the round
    in which it started without returning (`runtime.record.starts`), if it did."""

    recorded = Field(rr.JOURNAL, stored)
    fence = Field(rr.FENCE, integer)
    stopped = Field(rr.STOPPED, parse_stop_mark)
    started = Field(rr.STARTED, integer)


class TurnRead(Shape):
    """A model response journaled for a request of the working round (`runtime.record.turns`)."""

    response = Field(rr.TURN, stored)


class StopRead(Shape):
    stopped = Field(rr.STOPPED, parse_stop_mark)


class AfterFailover(Shape):
    """One call, as a web process looks for a decision it acknowledged, on a primary promoted
    since (`runtime.failover.decisions`)."""

    envelope = Envelope(rr.ENVELOPE, readable=True)
    exists = Present(rr.ENVELOPE)
    status = Field(rr.STATUS, text)
    round = Field(rr.ROUND, integer)
    gate = Field(rr.GATE, parse_gate)
    message_ts = Field(rr.TS, text)
    copies = Field(rr.COPIES, parse_copies)
    edit = Field(rr.EDIT, parse_edit)
    decided = Present(rr.DECISION)
    approvals = Field(rr.APPROVALS, parse_approvals)
