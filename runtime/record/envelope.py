"""Our versioned envelope around a run: what Countersign stores between the run's steps.

The SDK's RunState JSON has its own schema version; this envelope has ours, so that either can
change without the other silently misreading a stored run.

Versions:
- 1: envelope JSON in hash field `envelope`, zlib-compressed RunState JSON in field `state`,
  per-approval `deadline:`, `ts:` and `decision:` fields beside them.
- 2: each call also carries its policy (approvers, quorum, allow_always) and digest; partial
  quorum approvals live in `approvals:` fields. Version 1 reads as: anyone, one approval.
  A call of a tool from an MCP server also carries `mcp_server` and `description` (optional,
  absent for function tools: no new version, the meaning of every other field is unchanged).
- 3: each call also carries what its card shows beyond the arguments (`why`, `preview`), the
  tool's parameter schema, `allow_edit` and `grant_max_seconds`; an edit lives in `edit:`
  fields. Versions 1 and 2 read as: no edits, no grants. A call of a nested agent's tool also
  carries `inside`, the agents that ran it as a tool (optional, absent: none; no new version). A
  call may also carry `external` (absent: only members of the installing workspace may decide
  it; no new version).
  A call asked about again because it may have run (`runtime.runs.lost_outcomes`) also carries
  `lost` (written only when true: no new version). `edited_preview` is never stored. A call
  whose rules could not all be judged carries `unjudged`, one whose arguments do not fit its
  tool `invalid` (both written only when set: no new version; a web process of the previous
  version refuses to decide such a run, which fails closed).
  A call whose rule turns **Answer instead** off carries `answer: false` (absent: true; no new
  version: a web process of the previous version refuses such a run, which fails closed). A
  decision may carry `answer` (a person answered in the tool's place) and an approval `note`.
  A call whose rule reviews its output carries `review_output`, and once its output is held,
  `held` (both written only when set: no new version; its gate's `held` makes a web process of
  the previous version refuse to decide it, which fails closed).
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.jobs.contracts import APPROVAL_ID_PATTERN, RUN_ID_PATTERN, Conversation
from runtime.record.choices import ArgumentEdit, GrantRef

SCHEMA_VERSION: Final = 3
SCHEMA_VERSION_SUMMARIES: dict[int, str] = {
    1: "envelope JSON + zlib RunState + per-approval fields in one hash",
    2: "adds per-call approvers, quorum, allow_always, digest and quorum approvals",
    3: "adds per-call why, preview, params schema, allow_edit, grant_max_seconds and edits",
}

Outcome = Literal["approved", "approved_always", "rejected", "answered", "expired", "stopped"]
"""`answered`: a person answered in the tool's place (**Answer instead**); it did not run."""


class UnreadableEnvelope(Exception):
    """A stored run cannot be read by this Countersign; the message says why."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"run {run_id}: {reason}")
        self.run_id = run_id


class UnsupportedEnvelope(UnreadableEnvelope):
    """A stored run was written with an envelope version this code does not know."""

    def __init__(self, run_id: str, version: object) -> None:
        supported = ", ".join(
            f"{number} ({summary})" for number, summary in SCHEMA_VERSION_SUMMARIES.items()
        )
        super().__init__(
            run_id,
            f"stored with envelope schema version {version!r}; this Countersign reads "
            f"version {supported}",
        )
        self.version = version


class Approval(BaseModel):
    """One person's approval towards a quorum."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    user_name: str | None = None
    outcome: Literal["approved", "approved_always"]
    at: float
    note: str | None = Field(default=None, max_length=3000)
    """**Approve with a note…**: what the model reads after the tool's output."""


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Outcome
    user_id: str | None = None
    """Who decided last (the rejecter, or the approver who completed the quorum); None when
    nobody decided (expiry) or the policy did."""
    user_name: str | None = None
    reason: str | None = Field(None, max_length=3000)
    decided_at: float
    digest: str | None = None
    """The digest of the call as shown when it was decided: what is approved is what runs."""
    approvals: tuple[Approval, ...] = ()
    """Everyone whose approval counted, in order."""
    by_policy: bool = False
    edit: ArgumentEdit | None = None
    """The arguments a person approved instead of the model's (`digest` is theirs)."""
    granted: GrantRef | None = None
    """The grant this approval made."""
    by_grant: GrantRef | None = None
    """The grant that approved this call without a card."""
    answer: str | None = Field(default=None, max_length=3000)
    """For `answered`: what the person said the model should read as the call's result."""

    @property
    def notes(self) -> tuple[Approval, ...]:
        """The approvals that came with a note (**Approve with a note…**), in order."""
        return tuple(a for a in self.approvals if a.note)


class UnjudgedRule(BaseModel):
    """A rule whose `when` could not be judged for a call (`runtime.record.call_rule`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str
    """Its `name`, else its `when`."""
    reason: str
    """Why, in one clause: "the call has no `region`"."""


class CardCopy(BaseModel):
    """A copy of a call's card outside its thread: a direct message, or another channel."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    channel: str
    ts: str


class PendingCall(BaseModel):
    """One tool call waiting for a person."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approval_id: str = Field(pattern=APPROVAL_ID_PATTERN)
    call_id: str
    tool: str
    agent: str
    arguments: str
    """As the tool receives them (`runtime.judging.arguments`: the model's text unless the
    tool's schema converts a value): usually JSON, but not guaranteed to be."""
    expires_at: float
    approvers: tuple[str, ...] = ()
    """User and user-group ids who may decide; empty means anyone in the channel."""
    quorum: int = 1
    allow_always: bool = True
    digest: str = ""
    mcp_server: str | None = None
    """The MCP server the tool comes from (its `name`, or a hosted tool's `server_label`);
    None for function tools. Covered by the digest."""
    description: str | None = None
    """The tool's description from the MCP server's listing, shown on the card."""
    message_ts: str | None = None
    decision: Decision | None = None
    approvals: tuple[Approval, ...] = ()
    """Approvals so far, while a quorum is not yet met."""
    # Version 3: less fatigue, same safety (see runtime/record/choices.py).
    why: str | None = None
    """What the model said just before asking, shortened: the intent behind the call."""
    preview: str | None = None
    """The tool's preview of its effect; "" when it has one but it failed or took too long."""
    params_schema: dict[str, Any] | None = None
    """The tool's JSON schema of its arguments, so an edit is validated where no tool exists."""
    allow_edit: bool = False
    answer: bool = True
    """**Answer instead** is offered (its rule's `answer`); stored only when false."""
    grant_max_seconds: int = 0
    """The longest grant this call's rule allows; 0: none (always 0 under a quorum)."""
    edit: ArgumentEdit | None = None
    """An edit made while a quorum is not yet met (kept in its own field, like approvals)."""
    copies: tuple[CardCopy, ...] = ()
    """Copies of the card elsewhere (`notify`, escalation): one approval, redrawn together."""
    inside: tuple[str, ...] = ()
    """The agents that ran `agent` as a tool (`Agent.as_tool`), outermost first; () when the
    run's current agent asked itself."""
    external: bool = False
    """People outside the installing workspace may decide it too (its rule's `external`)."""
    when: str | None = None
    """The `when` of the policy rule the call fell under (`runtime.policy`), for the card and
    the audit trail; None: a rule without one, or no rule."""
    rule_name: str | None = None
    """The `name` of that rule, shown on the card instead of its `when`."""
    confirm: str | None = None
    """The argument whose value an approver types to approve (its rule's `confirm`)."""
    lost: bool = False
    """The call may have run and its result was lost: its card asks whether to run it again."""
    review_output: bool = False
    """Its rule says a person reviews its output before the model reads it: once the tool has
    run, the output is held (`runtime.journal.held`)."""
    held: str | None = None
    """The call ran and this is its held output (as the model would read it): the card asks
    to **Release** or **Withhold** it, and `digest` binds the output (`held_digest`)."""
    unjudged: tuple[UnjudgedRule, ...] = ()
    """Rules whose `when` could not be judged for the call: it must satisfy them and the rule
    it fell under otherwise, and nothing approved it by itself."""
    invalid: str | None = None
    """Why the arguments do not fit the tool ("`amount_cents`: Input should be a valid
    integer"): nothing approved it by itself; a person may reject or edit it."""
    channel: str | None = None
    """Where its card is, when not in the run's thread (a run started in a direct message: the
    approvers' channel, `CallRule.channel`); the decision script's gate names it."""
    edited_preview: str | None = None
    """The tool's preview of the edited arguments an approval binds, made just before the tool
    runs with them (`runtime.runs.edited_previews`); "" when it failed. Never stored: only the
    card drawn then shows it."""

    @property
    def shown_arguments(self) -> str:
        """The arguments people are asked about: the latest edit's, else the model's."""
        edit = self.decision.edit if self.decision and self.decision.edit else self.edit
        return edit.arguments if edit else self.arguments

    @property
    def shown_digest(self) -> str:
        edit = self.decision.edit if self.decision and self.decision.edit else self.edit
        return edit.digest if edit else self.digest


class RunEnvelope(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1, 2, 3] = SCHEMA_VERSION
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    root_agent: str
    """Name of the agent the run started with; resolved through the registry on resume."""
    task: str
    conversation: Conversation
    created_at: float
    round: int = 0
    """How many times the run has stopped for approvals."""
    calls: tuple[PendingCall, ...] = ()
    """The approvals of the current round."""

    def call(self, approval_id: str) -> PendingCall | None:
        return next((c for c in self.calls if c.approval_id == approval_id), None)


def parse_envelope(run_id: str, raw: bytes | str) -> RunEnvelope:
    """Read a stored envelope, refusing versions this code does not know."""
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise UnreadableEnvelope(run_id, "the stored envelope is not JSON") from error
    except RecursionError as error:  # Python's parser recurses; no envelope nests this deep
        raise UnreadableEnvelope(run_id, "the stored envelope nests too deep") from error
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version not in SCHEMA_VERSION_SUMMARIES:
        raise UnsupportedEnvelope(run_id, version)
    try:
        return RunEnvelope.model_validate(data)
    except ValidationError as error:
        raise UnreadableEnvelope(
            run_id, f"the stored envelope is invalid ({error.error_count()} problems)"
        ) from error


# Optional per-call fields written only when set, so that a function tool's call is stored
# exactly as before they existed and a web process of the previous version still reads it.
_OMITTED_WHEN_UNSET = (
    "mcp_server",
    "description",
    "inside",
    "external",
    "lost",
    "review_output",
    "held",
    "when",
    "rule_name",
    "confirm",
    "unjudged",
    "invalid",
    "channel",
)


def dump_envelope(envelope: RunEnvelope) -> str:
    """The stored form: per-call message ids and decisions live in fields of their own."""
    per_call = {"message_ts", "decision", "approvals", "edit", "copies", "edited_preview"}
    data = envelope.model_dump(mode="json", exclude={"calls": {"__all__": per_call}})
    for name in envelope.conversation.unset_fields:
        # Written only when set: a web process of the previous version reads every other run.
        data["conversation"].pop(name, None)
    for call in data["calls"]:
        for name in _OMITTED_WHEN_UNSET:
            if call.get(name) in (None, [], False):
                call.pop(name, None)
        if call.get("answer") is True:  # the default: written only when a rule turns it off
            call.pop("answer")
    if not data["conversation"].get("requester_external"):
        # Written only when set, so that a web process of the previous version reads the run.
        data["conversation"].pop("requester_external", None)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)
