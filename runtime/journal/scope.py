"""The run whose step is executing, and where its calls are recorded: what a tool's journaled
invoker (`runtime.journal.invoker`) and a journaled model (`runtime.models.journaled`) find in
their context while the step runs."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from runtime.audit.trail import AuditTrail
from runtime.record.choices import ArgumentEdit
from runtime.record.leases import Fenced, Lease
from runtime.record.stop_mark import StopMark
from runtime.record.store import RunStore
from runtime.record.turns import TurnsAsked
from runtime.reporter import RunView


@dataclass(kw_only=True, slots=True)
class ToolsInFlight:
    """Whether a tool of the step is executing: a stop waits for it to finish, then cancels."""

    count: int = 0
    stopping: StopMark | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class JournalScope:
    """The run whose step is executing, and where its calls are recorded."""

    store: RunStore
    audit: AuditTrail
    lease: Lease
    requester: str
    channel: str
    in_flight: ToolsInFlight
    edits: Mapping[str, ArgumentEdit] = field(default_factory=dict)
    """Call id -> the arguments a person approved instead of the model's (`ArgumentEdit`)."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """Call id -> the approvers' notes (**Approve with a note…**), read after the output."""
    heard: asyncio.Event | None = None
    """Set when the worker's `StopListener` hears that this run was stopped."""
    round: int = 0
    """The run's round being worked on: a start mark records it (`runtime.record.starts`)."""
    run_again: frozenset[str] = frozenset()
    """Call ids a person said to run again after their result was lost (`lost_outcomes`)."""
    reviewed: set[str] = field(default_factory=set)
    """Call ids whose output is held for a person once their tool has run (`held`); the
    round adds the calls it lets run without stopping."""
    released: frozenset[str] = frozenset()
    """Call ids whose held output a person released: the journal gives it to the model."""
    turns: TurnsAsked = field(default_factory=TurnsAsked)
    """This delivery's model requests, keyed for the turn journal (`runtime.record.turns`)."""
    run: RunView | None = None
    """The run, for whoever tells people of it mid-call (an MCP server's question)."""
    recorded_before: Mapping[str, bytes] | None = None
    """The tool outcomes recorded before this delivery held the run (`RunRecord.journal`);
    None: unknown."""
    recorded: dict[str, str] = field(default_factory=dict)
    """Call id -> the outcome this delivery recorded."""
    journaled: frozenset[str] | None = None
    """The turns journaled before this delivery held the run (`RunRecord.turns`): a request
    whose key is not among them was never answered, and is asked without looking it up. None:
    unknown, each is looked up."""

    async def journal_turns(self) -> None:
        """Journal this delivery's model turns not written yet (`TurnsAsked.pending`): before
        anything acts on one. Fenced if this delivery lost the run: nothing of them may run."""
        pending = dict(self.turns.pending)
        if not pending:
            return
        if not await self.store.turns.record(self.lease.run_id, self.lease.fence, pending):
            raise Fenced(self.lease.run_id)
        self.turns.journaled(pending)

    def known_turns(self) -> frozenset[str] | None:
        """Every model turn the run's hash holds (`turn_key`s), or None when not known."""
        if self.journaled is None:
            return None
        return self.journaled | self.turns.written

    def journal(self) -> list[bytes] | None:
        """Every tool outcome the run has recorded, as `RunStore.journal` would read it now;
        None when what was recorded before this delivery is not known."""
        if self.recorded_before is None:
            return None
        return [*self.recorded_before.values(), *(e.encode() for e in self.recorded.values())]


_SCOPE: contextvars.ContextVar[JournalScope | None] = contextvars.ContextVar(
    "countersign_journal_scope", default=None
)


@contextlib.contextmanager
def journal_scope(scope: JournalScope) -> Iterator[None]:
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current_scope() -> JournalScope | None:
    """The run whose step is executing here (its model calls too: `runtime.models.journaled`);
    None outside a Countersign run."""
    return _SCOPE.get()
