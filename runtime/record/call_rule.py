"""The policy for one call, and how two rules combine when a `when` cannot be judged.

A `when` that cannot be judged for a call (a missing field, values of different types, a
runtime error, over its budget: `runtime.judging.evaluation`) holds neither true nor false. The
call would fall under that rule if it held, and under the rule the policy goes on to otherwise;
not knowing which, it must satisfy both (`stricter`), field by field the stricter:

- a rejection wins (`auto = "reject"` of either);
- nothing approves it by itself: no `auto = "approve"`, no grant, no **Approve always**;
- a typed confirmation stays (two different ones: nobody can type for both, so it is rejected);
- the larger quorum;
- only the approvers both allow, by the same user or group id (anyone: the other's list);
  nobody left, or fewer users than the quorum (with no group among them): rejected, with a
  reason the model reads;
- people outside the workspace only where both let them decide; edits, answers and previews
  only where both allow them; the shorter wait; copies to both rules' `notify`; no escalation
  (it would widen who decides past what one of them allows).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from runtime.deciders import too_few

UNAPPROVABLE = "No person may approve it under the rules it may fall under"
"""How the reason the model reads begins, for a call rejected because of `CallRule.refusal`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Unjudged:
    """A rule whose `when` could not be judged for a call, and why."""

    rule: str
    """How people know the rule: its `name`, else its `when`."""
    reason: str
    """One sentence, lower case, no full stop: "the call has no `region`"."""
    index: int
    """In the policy's rules (for a line number)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallRule:
    """The policy for one tool call, defaults filled in: the `runtime.deciders.Terms` that go
    with the call to its card and gate, and how the call is asked (`ttl_seconds`, `auto`,
    `preview`, `notify`)."""

    approvers: tuple[str, ...]
    """Who may decide; empty means anyone in the channel."""
    quorum: int
    ttl_seconds: int
    allow_always: bool
    auto: Literal["approve", "reject"] | None
    grant_max_seconds: int = 0
    """The longest grant people may make for calls under this rule; 0: none."""
    allow_edit: bool = True
    answer: bool = True
    """People may **Answer instead** (the tool does not run; the model reads their answer)."""
    preview: bool = True
    """False: the card shows no preview, and the tool's preview is never called."""
    review_output: bool = False
    """The tool's output is held until a person releases it (`review_output`,
    `review_output_when`: judged on the call's arguments, `runtime.policy.rules`)."""
    notify: tuple[str, ...] = ()
    """Users, user groups and channels that get a copy of the card."""
    escalate_after_seconds: int | None = None
    escalate_to: tuple[str, ...] = ()
    """Still undecided after `escalate_after_seconds`: these may decide too, and are told."""
    external: bool = False
    """People outside the installing workspace (Slack Connect, guests) may decide too."""
    when: str | None = None
    """The rule's `when`, shown on the card and kept in the audit trail."""
    name: str | None = None
    """The rule's `name`, shown on the card instead of its `when`."""
    confirm: str | None = None
    """The argument whose value each approver types (no Approve always, grants or edits)."""
    index: int | None = None
    """The rule's place in the policy (None: no rule, the environment's defaults)."""
    unjudged: tuple[Unjudged, ...] = ()
    """The rules whose `when` could not be judged for the call: this rule is the stricter of
    them and the rule the call fell under otherwise."""
    refusal: str | None = None
    """Set when no person could ever approve the call under the combined rule: why, for the
    model (the call is rejected)."""
    channel: str | None = None
    """Where the card goes when the run was started in a direct message with the app (its
    rule's `channel`, else `APPROVAL_CHANNEL`); None: nowhere but the run's own conversation."""

    @property
    def unloosened(self) -> CallRule:
        """This rule approving nothing by itself: no automatic approval, no grant, no Approve
        always (a rejection stays)."""
        return replace(
            self,
            auto=None if self.auto == "approve" else self.auto,
            allow_always=False,
            grant_max_seconds=0,
        )


def stricter(unjudged: CallRule, otherwise: CallRule, why: Unjudged) -> CallRule:
    """What a call must satisfy when `why.rule` (resolved as `unjudged`) cannot be judged and
    the policy would otherwise put it under `otherwise`: both, field by field the stricter."""
    approvers, refusal = _both_allow(unjudged.approvers, otherwise.approvers)
    confirm = unjudged.confirm or otherwise.confirm
    if unjudged.confirm and otherwise.confirm and unjudged.confirm != otherwise.confirm:
        refusal = (
            f"they ask whoever approves it to type different arguments "
            f"(`{unjudged.confirm}` and `{otherwise.confirm}`)"
        )
    quorum = max(unjudged.quorum, otherwise.quorum)
    if (few := too_few(approvers, quorum)) is not None:
        people = "1 person is" if few == 1 else f"{few} people are"
        refusal = refusal or f"{quorum} approvals are needed but only {people} allowed by both"
    # A rule's own `auto = "reject"` wins; else the first reason nobody could approve it.
    rejected = unjudged.auto == "reject" or (otherwise.auto == "reject" and not otherwise.refusal)
    refusal = None if rejected else otherwise.refusal or refusal
    return CallRule(
        approvers=approvers,
        quorum=quorum,
        ttl_seconds=min(unjudged.ttl_seconds, otherwise.ttl_seconds),
        allow_always=False,
        auto="reject" if rejected or refusal is not None else None,
        grant_max_seconds=0,
        allow_edit=unjudged.allow_edit and otherwise.allow_edit,
        answer=unjudged.answer and otherwise.answer,
        preview=unjudged.preview and otherwise.preview,
        notify=tuple(dict.fromkeys((*unjudged.notify, *otherwise.notify))),
        external=unjudged.external and otherwise.external,
        when=unjudged.when,
        name=unjudged.name,
        confirm=confirm,
        index=unjudged.index,
        unjudged=(why, *otherwise.unjudged),
        refusal=refusal,
        channel=otherwise.channel or unjudged.channel,
    )


def _both_allow(
    first: tuple[str, ...], second: tuple[str, ...]
) -> tuple[tuple[str, ...], str | None]:
    """The approvers allowed by both lists (empty: anyone), and why nobody is, if nobody is."""
    if not first:
        return second, None
    if not second:
        return first, None
    both = tuple(p for p in first if p in second)
    if both:
        return both, None
    return (), "no approver is allowed by both"
