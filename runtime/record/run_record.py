"""A run as the worker reads it: what `RunStore.load` and `RunStore.create` return."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from pydantic import ValidationError

from runtime.record import layout as rr
from runtime.record.envelope import RunEnvelope, UnreadableEnvelope
from runtime.record.layout import Status
from runtime.record.leases import Lease
from runtime.record.permissions import AlwaysPermission
from runtime.record.reads import Whole


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    envelope: RunEnvelope
    """With each current call's message id and decision filled in."""
    status: Status
    state: str | None
    status_message: str | None
    status_steps: tuple[str, ...]
    """The steps the status message shows, kept across the run's stops for approval."""
    final_output: str | None
    permissions: tuple[AlwaysPermission, ...] = ()
    """The run's Approve always permissions, as written with its last round."""
    rule_keys: Mapping[str, str] = field(default_factory=dict)
    """Approval id -> the rule key of each call of the round that offered Approve always."""
    journal: Mapping[str, bytes] | None = None
    """Call id -> each tool outcome the hash held when read; None as for `turns`."""
    turns: frozenset[str] | None = None
    """The journaled model turns (`runtime.record.turns`) the hash held when read; None when
    another delivery may have written some since (read before this delivery's claim)."""

    @classmethod
    def new(cls, envelope: RunEnvelope) -> RunRecord:
        """A run just created (`RunStore.create`): exactly what was written, nothing read."""
        return cls(
            envelope=envelope,
            status="running",
            state=None,
            status_message=None,
            status_steps=(),
            final_output=None,
            journal={},
            turns=frozenset(),
        )


@dataclass(frozen=True, slots=True)
class Created:
    """What `RunStore.create` found: the run, and this delivery's lease when it created it
    (None: the run was there already, and is claimed like any other delivery's)."""

    record: RunRecord
    lease: Lease | None


def record_of(run_id: str, view: Whole, *, with_state: bool) -> RunRecord | None:
    """The run of a whole hash read (`read_whole`); None when it holds no run (gone, or a hash
    without its status or envelope); without its state unless asked."""
    status = view.status
    envelope = view.envelope if status is not None else None
    if envelope is None or status is None:
        return None
    try:
        calls = tuple(
            call.model_copy(
                update={
                    "message_ts": view.message_ts.get(call.approval_id),
                    "decision": view.decisions.get(call.approval_id),
                    "approvals": view.approvals.get(call.approval_id, ()),
                    "edit": view.edits.get(call.approval_id),
                    "copies": view.copies.get(call.approval_id, ()),
                }
            )
            for call in envelope.calls
        )
    except (ValidationError, ValueError) as error:
        # A decision written by another version: as unreadable as its envelope would be.
        raise UnreadableEnvelope(run_id, "a stored decision cannot be read") from error
    state = view.state
    return RunRecord(
        envelope=envelope.model_copy(update={"calls": calls}),
        status=cast(Status, status),
        state=zlib.decompress(state).decode() if (state and with_state) else None,
        status_message=view.status_message,
        status_steps=view.status_steps or (),
        final_output=view.final,
        permissions=view.always or (),
        rule_keys=view.rule_keys or {},
        journal=view.journal,
        turns=frozenset(view.turns),
    )


def status_fields(message_id: str, steps: list[str]) -> dict[str, str]:
    """The status message's fields of the run's hash: its id, and the steps it shows."""
    return {rr.STATUS_MESSAGE: message_id, rr.STATUS_STEPS: json.dumps(steps)}
