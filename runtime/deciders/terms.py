"""A policy rule's resolved fields that go with a call: who decides it, how many, and what may
stand in for a person. Defined once, here, below every shape that carries them.

They travel in four shapes: the rule as resolved for a call (`runtime.judging.CallRule`, which
is a `Terms`), the call waiting in the run's envelope (`PendingCall`), its gate (`CallGate`,
plain JSON the decision scripts read: `approvers` there is `users`, `groups` and `anyone`,
`name` is `rule_name`) and, for an edit that falls under a stricter rule, the gate rewritten
from that rule (`CallGate.regated_to`, which takes a `Terms`).
`tests/runtime/deciders/test_deciders.py` checks
that every field here reaches each shape, and that every field of a gate the scripts read is
one `CallGate` writes.
"""

from __future__ import annotations

from typing import Protocol


class Asked(Protocol):
    """Who must decide a call, and how: the part of `Terms` a waiting call keeps as it is."""

    @property
    def approvers(self) -> tuple[str, ...]:
        """User and user-group ids who may decide; empty: anyone in the call's channel."""
        ...

    @property
    def quorum(self) -> int:
        """Approvals needed, each by another person (a rejection decides at once)."""
        ...

    @property
    def external(self) -> bool:
        """People outside the installing workspace (Slack Connect, guests) may decide too."""
        ...

    @property
    def confirm(self) -> str | None:
        """The argument whose value each approver types."""
        ...


class Terms(Asked, Protocol):
    """The resolved fields of the rule a call falls under (defaults filled in)."""

    @property
    def allow_always(self) -> bool:
        """**Approve always** is offered (never under a quorum or a typed confirmation)."""
        ...

    @property
    def allow_edit(self) -> bool:
        """People may edit the arguments and approve the edited call."""
        ...

    @property
    def answer(self) -> bool:
        """People may **Answer instead**: the tool does not run, the model reads their answer."""
        ...

    @property
    def grant_max_seconds(self) -> int:
        """The longest grant people may make on the call; 0: none."""
        ...

    @property
    def when(self) -> str | None:
        """The rule's `when`, shown on the card and kept in the audit trail."""
        ...

    @property
    def name(self) -> str | None:
        """The rule's `name`, shown on the card instead of its `when`."""
        ...

    @property
    def escalate_after_seconds(self) -> int | None:
        """Still undecided this long after it was asked: `escalate_to` may decide too."""
        ...

    @property
    def escalate_to(self) -> tuple[str, ...]: ...


def asks_more(rule: Asked, than: Asked) -> bool:
    """Whether a call under `rule` asks more of whoever decides it than under `than`: a larger
    quorum, no outsiders where they could, a typed confirmation `than` did not ask, approvers of
    its own (other people, or some where anyone could decide: whoever edits may not be one).
    Approving under `than` would then skip `rule`."""
    return (
        rule.quorum > than.quorum
        or (than.external and not rule.external)
        or (rule.confirm is not None and rule.confirm != than.confirm)
        or (bool(rule.approvers) and set(rule.approvers) != set(than.approvers))
    )


TERMS = (
    "approvers",
    "quorum",
    "allow_always",
    "allow_edit",
    "answer",
    "grant_max_seconds",
    "external",
    "confirm",
    "when",
    "name",
    "escalate_after_seconds",
    "escalate_to",
)
"""The names of `Terms`' fields, for the test that follows them into every shape."""
