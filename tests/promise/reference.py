"""The reference model: what the policy allows, in plain Python, and the promise's invariants.

It never asks the runtime what a rule means. It knows the policy as Python predicates over the
values a tool receives (`REFERENCE_RULES`, the same rules as `tests.promise.world`'s TOML), and
it knows what people did, because the state machine tells it each click as it sends it: who
pressed what on which card, what the card showed, when on the world's clock. From that alone it
says whether a call may have run and how often. The runtime's own records (the audit trail, the
thread) are read only to check that they tell the same story: every decision has its entry.

Each invariant is checked over the whole history after every step:
- **authorized**: every executed call was approved for exactly those arguments by people the
  policy allows for it (enough of them, typed where the rule says so, in time), or covered by
  a grant, Approve always or automatic rule that the policy allows *for that call*;
- **once**: no call ran twice, unless a person pressed Run again on its "may have run" card;
- **audited**: every call that ran after an approval has its approval in the audit trail, and
  every card that shows a decision has the decision's entry;
- **not lost**: every run a person was told had started, and every decision a person saw
  recorded, leads somewhere: an open card, an answer, or a message saying why not.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from tests.promise.world import (
    CHANNEL,
    ESCALATE_AFTER_SECONDS,
    MEMBERS,
    NEEDS_NO_APPROVAL,
    TTL_SECONDS,
    Execution,
    LogicalCall,
    PlannedCall,
)

# --- what the tools receive -------------------------------------------------------------------


class _DropTable(BaseModel):
    name: str
    force: bool = False


class _RefundOrder(BaseModel):
    order_id: str
    amount_cents: int


class _UserId(BaseModel):
    user_id: str


class _Service(BaseModel):
    service: str


_SCHEMAS: dict[str, type[BaseModel]] = {
    "drop_table": _DropTable,
    "refund_order": _RefundOrder,
    "delete_user": _UserId,
    "restart_service": _Service,
    "read_logs": _Service,
}


def received(tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments as the tool would receive them (validated as the SDK validates a function
    tool's JSON arguments); None: the tool would refuse them."""
    schema = _SCHEMAS.get(tool)
    if schema is None:
        return dict(arguments)
    try:
        return schema.model_validate_json(json.dumps(arguments)).model_dump()
    except ValidationError:
        return None


# --- the policy, in Python ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RefRule:
    name: str
    tool: str
    when: Callable[[dict[str, Any]], bool] | None = None
    approvers: tuple[str, ...] | None = None
    """None: any member of the workspace."""
    quorum: int = 1
    auto: Literal["approve", "reject"] | None = None
    confirm: str | None = None
    escalate_to: tuple[str, ...] = ()

    @property
    def allow_always(self) -> bool:
        return self.quorum == 1 and self.confirm is None and self.auto is None

    @property
    def grant_max_seconds(self) -> int:
        return 86400 if self.allow_always else 0


def _rules(forced: RefRule) -> tuple[RefRule, ...]:
    return (
        RefRule(
            name="production tables",
            tool="drop_table",
            when=lambda a: str(a["name"]).startswith("prod_"),
            approvers=("UALICE",),
        ),
        forced,
        RefRule(
            name="small refunds", tool="refund_order", when=lambda a: a["amount_cents"] <= 10000
        ),
        RefRule(
            name="large refunds", tool="refund_order", approvers=("UALICE", "UCAROL"), quorum=2
        ),
        RefRule(name="deletions", tool="delete_user", confirm="user_id"),
        RefRule(name="log reads", tool="read_logs", auto="approve"),
        RefRule(
            name="restarts", tool="restart_service", approvers=("UBOB",), escalate_to=("UCAROL",)
        ),
    )


def _forced(**rule: Any) -> RefRule:
    return RefRule(
        name="forced drops", tool="drop_table", when=lambda a: a["force"] is True, **rule
    )


REFERENCE_RULES: dict[str, tuple[RefRule, ...]] = {
    "strict": _rules(_forced(auto="reject")),
    "typed": _rules(_forced(confirm="name")),
}
DEFAULT_RULE = RefRule(name="default", tool="*")


def rule_for(policy: str, tool: str, arguments: dict[str, Any]) -> RefRule:
    """The rule a call falls under, judged on what the tool receives."""
    for rule in REFERENCE_RULES[policy]:
        if rule.tool == tool and (rule.when is None or rule.when(arguments)):
            return rule
    return DEFAULT_RULE


def _approves(click: Click, rule: RefRule, shown: dict[str, Any] | None) -> bool:
    """Whether a click approves the call shown under `rule`: under `confirm`, only a typed
    approval with the right value does (never an edit, Approve always or a grant)."""
    if rule.confirm is None:
        return True
    if click.kind != "typed" or shown is None:
        return False
    return click.value == str(shown.get(rule.confirm))


# --- what people did ---------------------------------------------------------------------------

ClickKind = Literal["approve", "note", "always", "grant", "typed", "edit", "reject", "answer"]
"""`note`: **Approve with a note…**, an approval like `approve`; `answer`: **Answer instead**,
a decision like `reject` (the first decision wins, and the tool does not run)."""
APPROVING_AGAIN = ("approve", "note")
"""The clicks that run a "may have run" card's call again."""


@dataclass(frozen=True)
class Click:
    person: str
    approval_id: str
    kind: ClickKind
    at: float
    value: str | None = None
    """typed: what was typed."""
    arguments: dict[str, Any] | None = None
    """edit: the edited arguments."""
    grant: tuple[str, int] | None = None
    """grant: (scope, seconds)."""


@dataclass
class Card:
    approval_id: str
    call_id: str
    run: str
    tool: str
    arguments: dict[str, Any]
    """As the model sent them, as the card shows them."""
    opened_at: float
    lost: bool = False
    """A "may have run" card: approving it runs the call again."""


@dataclass
class Run:
    tag: str
    requester: str
    channel: str = CHANNEL
    stopped_at: float | None = None


@dataclass(frozen=True)
class Violation:
    invariant: Literal["authorized", "once", "audited", "not lost"]
    kind: str
    """What made it happen, for grouping: `always/other-rule`, `twice/reissued`, ..."""
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} [{self.kind}]: {self.detail}"


@dataclass
class Reference:
    policy: str
    runs: dict[str, Run] = field(default_factory=dict)
    cards: dict[str, Card] = field(default_factory=dict)
    """By approval id."""
    clicks: list[Click] = field(default_factory=list)
    revoked: dict[str, float] = field(default_factory=dict)
    """Grant id -> when a person revoked it."""
    grants: dict[str, str] = field(default_factory=dict)
    """Grant id -> the approval id of the card it was made on (from the trail's `granted`)."""
    logical: dict[str, LogicalCall] = field(default_factory=dict)
    """Call id -> the planned call (the model's ids)."""
    sent: dict[str, PlannedCall] = field(default_factory=dict)
    """Call id -> the call as the model sent it."""

    # --- who may decide ------------------------------------------------------------------------

    def may_decide(self, person: str, rule: RefRule, run: Run, card: Card, at: float) -> bool:
        if person == run.requester or person not in MEMBERS:
            return False
        if at >= card.opened_at + TTL_SECONDS:
            return False
        if rule.approvers is None or person in rule.approvers:
            return True
        return person in rule.escalate_to and at >= card.opened_at + ESCALATE_AFTER_SECONDS

    def may_grant_or_always(self, person: str, rule: RefRule, run: Run) -> bool:
        """Whether `person`'s standing approval may stand for a call of `run` under `rule`."""
        if person == run.requester or person not in MEMBERS:
            return False
        if run.requester not in MEMBERS:
            return False  # nobody's standing approval decides for someone outside
        return rule.approvers is None or person in rule.approvers

    # --- the invariants ------------------------------------------------------------------------

    def violations(
        self, ledger: Iterable[Execution], trail: list[dict[str, Any]], thread: ThreadFacts
    ) -> list[Violation]:
        executions = list(ledger)
        found: list[Violation] = []
        for execution in executions:
            problem = self.unauthorized(execution, trail)
            if problem is not None:
                found.append(problem)
        found += self.twice(executions)
        found += self.unaudited(executions, trail, thread)
        found += self.lost(thread)
        return found

    def unauthorized(self, execution: Execution, trail: list[dict[str, Any]]) -> Violation | None:
        if execution.tool in NEEDS_NO_APPROVAL:
            return None
        logical = self.logical.get(execution.call_id)
        run = self.runs.get(logical.run) if logical else None
        if logical is None or run is None:
            return Violation("authorized", "unknown-call", f"{execution} was never asked for")
        if run.stopped_at is not None and execution.at > run.stopped_at:
            return Violation("authorized", "after-stop", f"{execution} ran after its run stopped")
        rule = rule_for(self.policy, execution.tool, execution.arguments)
        if rule.auto == "approve":
            return None
        if rule.auto != "reject" and (
            self._approved_on_a_card(execution, logical, rule, run)
            or self._always(execution, rule, run)
            or self._granted(execution, rule, run)
        ):
            return None
        how = self._how_the_runtime_let_it(execution, trail)
        return Violation(
            "authorized",
            how,
            f"{execution.tool} {json.dumps(execution.arguments)} (call {execution.call_id}, "
            f"requested by {run.requester}) ran under rule '{rule.name}', which nobody's "
            f"approval allowed; the runtime let it through by {how}",
        )

    def _approved_on_a_card(
        self, execution: Execution, logical: LogicalCall, rule: RefRule, run: Run
    ) -> bool:
        """Enough people who may decide it approved exactly the executed call on one of its
        cards (a call asked again has a card per asking; approvals do not add across them)."""
        return any(
            self._card_approves(card, execution, rule, run)
            for card in self.cards.values()
            if self.logical.get(card.call_id) == logical
        )

    def _card_approves(self, card: Card, execution: Execution, rule: RefRule, run: Run) -> bool:
        shown = received(card.tool, card.arguments)
        approvers: set[str] = set()
        for click in self._clicks_before(card.approval_id, execution.at):
            if click.kind in ("reject", "answer"):
                shown_rule = rule_for(self.policy, card.tool, shown or card.arguments)
                if self.may_decide(click.person, shown_rule, run, card, click.at):
                    return False  # the first decision wins: nothing after it counts
                continue
            if click.kind == "edit":
                assert click.arguments is not None
                shown = received(card.tool, click.arguments)
                approvers = set()  # a new call: the count starts again
            if not _approves(click, rule, shown) or shown != execution.arguments:
                continue
            if self.may_decide(click.person, rule, run, card, click.at):
                approvers.add(click.person)
            if len(approvers) >= rule.quorum:
                return True
        return False

    def _always(self, execution: Execution, rule: RefRule, run: Run) -> bool:
        if not rule.allow_always:
            return False
        for click in self.clicks:
            card = self.cards.get(click.approval_id)
            if click.kind != "always" or card is None or click.at > execution.at:
                continue
            if card.run != run.tag or card.tool != execution.tool:
                continue
            shown = received(card.tool, card.arguments)
            if shown is None or rule_for(self.policy, card.tool, shown) != rule:
                continue
            if self.may_decide(click.person, rule, run, card, click.at):
                return True
        return False

    def _granted(self, execution: Execution, rule: RefRule, run: Run) -> bool:
        for click in self.clicks:
            card = self.cards.get(click.approval_id)
            if click.kind != "grant" or card is None or click.grant is None:
                continue
            scope, seconds = click.grant
            if not click.at <= execution.at < click.at + seconds:
                continue
            if self._revoked_before(click.approval_id, execution.at):
                continue
            origin = self.runs[card.run]
            shown = received(card.tool, card.arguments)
            if origin.channel != run.channel or card.tool != execution.tool or shown is None:
                continue
            if scope == "arguments" and shown != execution.arguments:
                continue
            shown_rule = rule_for(self.policy, card.tool, shown)
            if seconds > min(rule.grant_max_seconds, shown_rule.grant_max_seconds):
                continue
            if not self.may_decide(click.person, shown_rule, origin, card, click.at):
                continue
            if self.may_grant_or_always(click.person, rule, run):
                return True
        return False

    def _revoked_before(self, approval_id: str, at: float) -> bool:
        return any(
            self.grants.get(grant_id) == approval_id and when <= at
            for grant_id, when in self.revoked.items()
        )

    def _clicks_before(self, approval_id: str, at: float) -> list[Click]:
        return [c for c in self.clicks if c.approval_id == approval_id and c.at <= at]

    def _how_the_runtime_let_it(self, execution: Execution, trail: list[dict[str, Any]]) -> str:
        """Which path approved the call, as the trail and the arguments tell: the kind of a
        violation, by which a known one is told from a new one."""
        events = {e["event"] for e in trail if e.get("call_id") == execution.call_id}
        raw = self._raw_arguments(execution.call_id)
        coerced = "+coerced" if raw is not None and raw != execution.arguments else ""
        if "grant_used" in events:
            run = self.runs[self.logical[execution.call_id].run]
            outside = "+outside-requester" if run.requester not in MEMBERS else ""
            return f"grant{coerced}{outside}"
        if "auto_approved" in events:
            return f"auto{coerced}"
        if "edited" in events:
            return "edit"
        if events & {"approved", "approved_always"}:
            return f"card{coerced}"
        if any(c.kind == "always" for c in self.clicks):
            return f"always{coerced}"
        return "no-approval"

    def _raw_arguments(self, call_id: str) -> dict[str, Any] | None:
        """What the model sent for the call."""
        sent = self.sent.get(call_id)
        return None if sent is None else sent.arguments

    def twice(self, executions: list[Execution]) -> list[Violation]:
        by_call: dict[LogicalCall | str, list[Execution]] = {}
        for execution in executions:
            key: LogicalCall | str = self.logical.get(execution.call_id) or execution.call_id
            by_call.setdefault(key, []).append(execution)
        again = Counter(
            self.logical.get(self.cards[c.approval_id].call_id)
            for c in self.clicks
            if c.kind in APPROVING_AGAIN and self.cards[c.approval_id].lost
        )
        found = []
        for key, runs in by_call.items():
            allowed = 1 + (again[key] if isinstance(key, LogicalCall) else 0)
            if len(runs) <= allowed:
                continue
            ids = {r.call_id for r in runs}
            kind = "twice/same-call-id" if len(ids) == 1 else "twice/reissued"
            if runs[0].tool in NEEDS_NO_APPROVAL:
                kind += "+no-approval"
            found.append(
                Violation(
                    "once",
                    kind,
                    f"{runs[0].tool} {json.dumps(runs[0].arguments)} ran {len(runs)} times "
                    f"(call ids {sorted(ids)}), {allowed - 1} Run again click(s)",
                )
            )
        return found

    def unaudited(
        self, executions: list[Execution], trail: list[dict[str, Any]], thread: ThreadFacts
    ) -> list[Violation]:
        approvals = {"approved", "approved_always", "grant_used", "auto_approved", "edited"}
        audited = {e.get("call_id") for e in trail if e["event"] in approvals}
        found = []
        for execution in executions:
            if execution.tool in NEEDS_NO_APPROVAL or execution.call_id in audited:
                continue
            how = self._how_the_runtime_let_it(execution, trail)
            found.append(
                Violation(
                    "audited",
                    f"no-entry/{how}",
                    f"{execution.tool} {json.dumps(execution.arguments)} (call "
                    f"{execution.call_id}) ran with no approval of it in the audit trail",
                )
            )
        decided = {
            e.get("approval_id")
            for e in trail
            if e["event"]
            in {
                "approved",
                "approved_always",
                "rejected",
                "answered",
                "expired",
                "stopped",
                "edited",
            }
        }
        stopped_runs = {e.get("run_id") for e in trail if e["event"] == "stopped"}
        for approval_id, run_id in thread.decided_cards.items():
            if approval_id not in decided and run_id not in stopped_runs:
                found.append(
                    Violation(
                        "audited",
                        "decision-without-entry",
                        f"the card of {approval_id} shows a decision the trail does not hold",
                    )
                )
        return found

    def lost(self, thread: ThreadFacts) -> list[Violation]:
        if not thread.settled:
            return []  # a step that has not settled yet may still reach its ending
        found = []
        for tag in self.runs:
            if tag in thread.settled_runs:
                continue
            found.append(
                Violation(
                    "not lost",
                    "run-without-ending",
                    f"run {tag} was acknowledged but has neither an open card nor an ending",
                )
            )
        return found


@dataclass(frozen=True)
class ThreadFacts:
    """What the people see, read off the fake Slack after a step settled."""

    decided_cards: dict[str, str]
    """Approval id -> run id, of cards that show a decision (no buttons left)."""
    settled_runs: frozenset[str]
    """Run tags whose thread has an open card or an ending."""
    settled: bool = True
    """The step settled (nothing queued, due or posting) before these were read."""
