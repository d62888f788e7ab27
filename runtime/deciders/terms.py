"""A policy rule's resolved fields that go with a call: who decides it, how many, and what may
stand in for a person. Defined once, here, below every shape that carries them.

They travel in four shapes: the rule as resolved for a call (`runtime.judging.CallRule`, which
is a `Terms`), the call waiting in the run's envelope (`PendingCall`), its gate (`CallGate`,
plain JSON the decision scripts read: `approvers` there is `users`, `groups` and `anyone`,
`name` is `rule_name`) and, for an edit that falls under a stricter rule, the gate rewritten
from that rule (`CallGate.regated_to`, which takes a `Terms`). `tests/test_deciders.py` checks
that every field here reaches each shape, and that every field of a gate the scripts read is
one `CallGate` writes.
"""

from __future__ import annotations

from typing import Protocol


class Terms(Protocol):
    """The resolved fields of the rule a call falls under (defaults filled in)."""

    @property
    def approvers(self) -> tuple[str, ...]:
        """User and user-group ids who may decide; empty: anyone in the call's channel."""
        ...

    @property
    def quorum(self) -> int:
        """Approvals needed, each by another person (a rejection decides at once)."""
        ...

    @property
    def allow_always(self) -> bool:
        """**Approve always** is offered (never under a quorum or a typed confirmation)."""
        ...

    @property
    def allow_edit(self) -> bool:
        """People may edit the arguments and approve the edited call."""
        ...

    @property
    def grant_max_seconds(self) -> int:
        """The longest grant people may make on the call; 0: none."""
        ...

    @property
    def external(self) -> bool:
        """People outside the installing workspace (Slack Connect, guests) may decide too."""
        ...

    @property
    def confirm(self) -> str | None:
        """The argument whose value each approver types."""
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


TERMS = (
    "approvers",
    "quorum",
    "allow_always",
    "allow_edit",
    "grant_max_seconds",
    "external",
    "confirm",
    "when",
    "name",
    "escalate_after_seconds",
    "escalate_to",
)
"""The names of `Terms`' fields, for the test that follows them into every shape."""
