"""The run record: one Redis hash per run, its field names, and every script that touches it.

This module owns the layout. `RunStore` (the worker's steps) and `DecisionRecorder` (people's
decisions) call its scripts (declared in `runtime.record.scripts`, from `runtime/record/lua/`,
each file headed by its keys and arguments) and nothing else writes the hash.

Fields of `run:<id>`:
- `envelope` (our versioned JSON, `runtime.record.envelope`), `state` (zlib of the SDK's
  RunState JSON);
- `status` (`Status`), `round`, `pending` (open approvals of the round), `fence` (see below);
- plain copies that any version can read: `channel`, `requester`, `thread`, `reply_url`;
- `status_message`, `status_steps`, `final` (the answer, kept until it is posted), `stopped`;
- `always` (the run's Approve always permissions) and `rules` (the rule key of each call of
  the round that offers Approve always), `runtime.record.permissions`: fields an earlier
  version neither reads nor writes, so it honours no permission and covers no other call;
- per approval of the current round: `deadline:<id>`, `ts:<id>` (its card), `gate:<id>` (who may
  decide it, as plain JSON: `CallGate`), `approvals:<id>` (towards a quorum), `denied:<id>`,
  `decision:<id>`, `edit:<id>` (arguments a person edited, `runtime.record.choices`),
  `copies:<id>` (its card elsewhere), `reach:<id>` (`CallReach`: notify, reminders,
  escalation) and `nudged:<id>` (until when those were done);
- per tool call that ran: `journal:<call id>`, its recorded output (`runtime.journal.invoker`), and
  `started:<call id>`, the round it started in (`runtime.record.starts`);
- per model response of the working round that asked for tool calls: `turn:<round>:<request>`
  (`runtime.record.turns`), dropped when the run stops for approvals;
- per call of a script of the hash that takes effect once: `once:<token>`, its reply
  (`runtime.record.once.RunOnce`), gone with the hash.

**Fencing.** Every delivery of a job claims the run (or, for a new run, creates it) and gets a
new, higher `fence`; every
write a worker makes for that step names its fence and is refused once a later delivery has
claimed the run. A worker that lost its job (paused, partitioned) can no longer write.

When a run ends its hash goes and a tombstone `done:<id>` stays for `TOMBSTONE_SECONDS`, so a
redelivered start job cannot replay a finished run.
"""

from __future__ import annotations

import json
import secrets
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

from runtime.deciders import Terms, is_group, split
from runtime.record.envelope import PendingCall, RunEnvelope

Status = Literal["running", "waiting", "ready", "resuming", "finishing", "failed", "stopped"]

ENVELOPE: Final = "envelope"
STATE: Final = "state"
STATUS: Final = "status"
ROUND: Final = "round"
PENDING: Final = "pending"
FENCE: Final = "fence"
CHANNEL: Final = "channel"
REQUESTER: Final = "requester"
THREAD: Final = "thread"
REPLY_URL: Final = "reply_url"
STATUS_MESSAGE: Final = "status_message"
STATUS_STEPS: Final = "status_steps"
FINAL: Final = "final"
STOPPED: Final = "stopped"
"""Who stopped the run (JSON), once someone did; a working run stops at its next safe point."""
ALWAYS: Final = "always"
"""The run's Approve always permissions (JSON list of `AlwaysPermission`), written each round."""
RULES: Final = "rules"
"""Approval id -> the rule key (`RuleKey.token`) of each call of the round that offers Approve
always: the decision script covers a call waiting beside the approved one under the same key."""
# Per approval id of the current round:
DEADLINE: Final = "deadline:"
TS: Final = "ts:"
GATE: Final = "gate:"
APPROVALS: Final = "approvals:"
DENIED: Final = "denied:"
DECISION: Final = "decision:"
EDIT: Final = "edit:"
"""Arguments a person edited while a quorum is not yet met (JSON `ArgumentEdit`)."""
COPIES: Final = "copies:"
"""Copies of the card outside the thread (JSON list of `CardCopy`): one approval, many places."""
REACH: Final = "reach:"
"""Who else hears of the call, and when (`CallReach`: notify, escalation, reminders)."""
NUDGED: Final = "nudged:"
"""Until when the call's reminders and escalation have been done (epoch seconds)."""
PER_CALL = (DEADLINE, TS, GATE, APPROVALS, DENIED, DECISION, EDIT, COPIES, REACH, NUDGED)
# Per SDK call id:
JOURNAL: Final = "journal:"
STARTED: Final = "started:"
ANNOUNCED: Final = "announced:"
"""A call decided without a person (a rule, an Approve always) has its audit entry: a job
redelivered after its worker died replays the turn and decides it again, saying nothing."""
# Per model request of the working round (`runtime.record.turns`):
TURN: Final = "turn:"
# Per call of a script that takes effect once (`runtime.record.once.RunOnce`): its reply.
ONCE: Final = "once:"

# A run that is working (not waiting for people) and untouched for this long is abandoned.
RUNNING_TTL_SECONDS = 6 * 3600
# The state outlives the last deadline by this much so an expiry can still be handled after
# every worker was down for a while.
STATE_GRACE_SECONDS = 86400
# Longer than a job can wait in the stream (dead-lettered after a few deliveries) and than the
# longest approval (7 days): no redelivery can outlive it.
TOMBSTONE_SECONDS = 8 * 86400

GATE_VERSION: Final = 1
HOME_TAB: Final = "@home"
"""Where a decision made on the app's Home tab comes from, instead of a channel id."""


_GATE_OMITTED_WHEN_UNSET = (
    "external",
    "confirm",
    "confirm_value",
    "regated",
    "held",
    "when",
    "rule_name",
    "escalate_after_seconds",
    "escalate_to",
)


class CallGate(BaseModel):
    """Who may decide one call, written when the run stops for it and read by the decision script.

    Plain JSON beside the versioned envelope, so that the script enforces it even when a web
    process of another version cannot read the envelope. A gate of an unknown `v` is refused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: int = GATE_VERSION
    round: int
    call_id: str
    tool: str
    agent: str
    requester: str
    channel: str
    users: tuple[str, ...]
    groups: tuple[str, ...]
    anyone: bool
    quorum: int
    allow_always: bool
    self_ok: bool
    digest: str
    mcp_server: str | None = None
    """The MCP server of the call's tool (None: a function tool); a grant made on it keeps it."""
    allow_edit: bool = False
    answer: bool = True
    """**Answer instead** is allowed (`choices.lua`); written only when false."""
    grant_max_seconds: int = 0
    """Read by the decision script (`runtime/record/lua/choices.lua`); absent: no edits, no
    grants."""
    external: bool = False
    """People outside the installing workspace may decide (absent: members only)."""
    confirm: str | None = None
    confirm_value: str | None = None
    """The argument an approver must type (`confirm`) and its value in the arguments the digest
    binds (None: absent, so nobody can approve); compared by `choices.lua`."""
    held: bool = False
    """The call ran and its output is held: deciding it releases or withholds the output
    (the decision script's audit events say so); only from its card."""
    regated: bool = False
    """An edit moved the call under a stricter rule (`regated_to`): this gate, not the call
    stored in the run's state, says who decides, how many, and under which rule."""
    when: str | None = None
    rule_name: str | None = None
    """With `regated`: the `when` and `name` of the rule the edited call fell under."""
    escalate_after_seconds: int | None = None
    escalate_to: tuple[str, ...] = ()
    """With `regated`: the stricter rule's escalation, which replaces the looser rule's planned
    with the call (`CallReach.under`)."""

    def stored(self) -> str:
        """The JSON written to `gate:<id>`. Fields newer than a version still in service are left
        out while unset, so a process of that version (its gates are `extra="forbid"`) still
        reads every gate that asks nothing new of it during a rolling deploy; a gate that does
        (an outsider may decide, a typed confirmation) it refuses, which fails closed."""
        data = self.model_dump(mode="json")
        for name in _GATE_OMITTED_WHEN_UNSET:
            if data.get(name) in (None, False, []):
                data.pop(name, None)
        if data.get("answer") is True:  # the default: written only when a rule turns it off
            data.pop("answer")
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    def widened(self, principals: tuple[str, ...]) -> CallGate:
        """This gate with more users and groups who may decide (an escalation); channels in
        `principals` are not people and are left out."""
        users = (*self.users, *(p for p in principals if p[0] in "UW" and p not in self.users))
        groups = (*self.groups, *(p for p in principals if is_group(p) and p not in self.groups))
        return self.model_copy(update={"users": users, "groups": groups})

    def applied_to(self, call: PendingCall) -> PendingCall:
        """`call` naming who may decide it now: an escalation widens the gate, not the call
        stored in the run's state, and a card must not name fewer people than may decide."""
        approvers = () if self.anyone else (*self.users, *self.groups)
        if not self.regated:
            return call if self.anyone else call.model_copy(update={"approvers": approvers})
        return call.model_copy(
            update={
                "approvers": approvers,
                "quorum": self.quorum,
                "allow_always": self.allow_always,
                "allow_edit": self.allow_edit,
                "answer": self.answer,
                "grant_max_seconds": self.grant_max_seconds,
                "external": self.external,
                "confirm": self.confirm,
                "when": self.when,
                "rule_name": self.rule_name,
            }
        )

    def regated_to(self, rule: Terms, arguments: str, digest: str) -> CallGate:
        """This gate under the stricter rule an edit moved the call to: its approvers, quorum
        and loosenings, bound to the edited arguments (`digest`), the count to restart. Written
        by the decision script with the edit (`decide.lua`), never around it.

        Who may decide then is the stricter rule's approvers only. People an escalation added
        under the looser rule are not carried over: they were asked to help with the looser
        rule's calls, and keeping them would let the looser rule's escalation decide a call the
        stricter rule keeps from them; they decide only if the stricter rule names them. The
        stricter rule's own escalation applies as if the call had been asked under it, counted
        from when it was asked (`CallReach.asked_at`): a call that has already waited past the
        rule's `escalate_after_seconds` escalates to its `escalate_to` at once (the script puts
        the call's reminders entry at now, and the worker's escalation widens this gate, with
        its audit entry, mention and copies), a later one when that time comes; the looser
        rule's escalation never widens this gate (`runtime.waiting.reminders`)."""
        users, groups = split(rule.approvers)
        return self.model_copy(
            update={
                "users": users,
                "groups": groups,
                "anyone": not rule.approvers,
                "quorum": rule.quorum,
                "allow_always": self.allow_always and rule.allow_always,
                "allow_edit": self.allow_edit and rule.allow_edit,
                "answer": self.answer and rule.answer,
                "grant_max_seconds": min(self.grant_max_seconds, rule.grant_max_seconds),
                "external": rule.external,
                "confirm": rule.confirm,
                "confirm_value": None
                if rule.confirm is None
                else confirm_text(arguments, rule.confirm),
                "digest": digest,
                "regated": True,
                "when": rule.when,
                "rule_name": rule.name,
                "escalate_after_seconds": rule.escalate_after_seconds,
                "escalate_to": rule.escalate_to,
            }
        )

    @classmethod
    def of(cls, envelope: RunEnvelope, call: PendingCall, *, self_ok: bool) -> CallGate:
        users, groups = split(call.approvers)
        return cls(
            round=envelope.round,
            call_id=call.call_id,
            tool=call.tool,
            agent=call.agent,
            requester=envelope.conversation.requester,
            channel=call.channel or envelope.conversation.channel,
            users=users,
            groups=groups,
            anyone=not call.approvers,
            quorum=call.quorum,
            allow_always=call.allow_always,
            self_ok=self_ok,
            digest=call.digest,
            mcp_server=call.mcp_server,
            allow_edit=call.allow_edit,
            answer=call.answer,
            grant_max_seconds=call.grant_max_seconds,
            external=call.external,
            held=call.held is not None,
            confirm=call.confirm,
            confirm_value=None
            if call.confirm is None
            else confirm_text(call.arguments, call.confirm),
        )


def fence_step() -> int:
    """How much a claim raises the fence (`claim.lua`): at random, up to about a million."""
    return 1 + secrets.randbelow(1 << 20)


def confirm_text(arguments: str, name: str) -> str | None:
    """What an approver types for argument `name`: a string as it is, any other value as its
    JSON (`1200`); None when the arguments have no such argument."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or name not in parsed:
        return None
    value = parsed[name]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
