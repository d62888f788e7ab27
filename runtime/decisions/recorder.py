"""Recording people's decisions (and expiries) through the one decision script.

Who may decide is enforced inside the script, from the call's gate (`runtime.record.layout`); the
caller only says who clicked and which of the gate's groups that person is in. A decision is
read-only for the caller otherwise: what is approved is the gate's digest, not anything sent.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Literal, cast

import redis.asyncio as aioredis

from runtime.audit.arguments import KeptArguments
from runtime.audit.events import AuditEvent
from runtime.db.keys import Keys
from runtime.db.replication import NO_REPLICAS, NotReplicated, Replication
from runtime.grants.store import note_grant_shard
from runtime.jobs.contracts import ResumeJob, resume_version
from runtime.jobs.due_set import WAKE_STREAM_LENGTH
from runtime.record import scripts as rs
from runtime.record.choices import ArgumentEdit, GrantScope
from runtime.record.envelope import (
    Approval,
    Decision,
    Outcome,
    PendingCall,
    RunEnvelope,
    UnreadableEnvelope,
)
from runtime.record.layout import CallGate
from runtime.record.reads import CallRead
from runtime.record.view import read
from runtime.waiting.status import WaitingStatus, waiting_status

Status = Literal[
    "recorded",  # this decision was stored
    "counted",  # an approval towards a quorum that is not met yet
    "already_approved",  # this person's approval already counts towards the quorum
    "decided",  # someone decided first; `decision` says who and how
    "expired",  # the deadline passed before this click
    "closed",  # the run is no longer waiting for decisions (resuming or finishing)
    "unknown",  # no such approval in this run and channel
    "gone",  # no such run (never existed, or finished longer ago than its tombstone lasts)
    "finished",  # the run has finished (its tombstone): a late copy of a click that decided, too
    "early",  # an expiry was attempted before the deadline
    "open",  # (check only) a decision would be recorded now
    "unreadable",  # the call's gate was written by another version: nobody may decide now
    "not_allowed",  # this person may not decide this call
    "outside",  # this person is no member of the installing workspace, and the call wants one
    "self",  # the requester may not approve their own run's call
    "not_offered",  # "Approve always" is not offered for this call
    "grant_not_offered",  # no grant this long is offered for this call (or under a quorum)
    "edit_not_offered",  # the policy does not allow editing this call
    "edit_stale",  # the arguments changed since the editor opened them
    "confirm_needed",  # approving this call needs its `confirm` argument typed
    "confirm_wrong",  # the typed value is not the call's `confirm` argument
    "stale",  # the call changed since the person's screen showed it (its digest differs)
    "regated",  # an edit under a stricter rule: stored, not approved, the call under its gate
    "answer_not_offered",  # the call's rule says `answer = false`
    "held_on_card",  # a held output is released or withheld on its card only
]


@dataclass(frozen=True, kw_only=True, slots=True)
class GrantChoice:
    """Approve, and let later calls like this one run without a card (`runtime.grants.store`)."""

    id: str
    scope: GrantScope
    seconds: int


@dataclass(frozen=True, kw_only=True, slots=True)
class EditChoice:
    """Approve these arguments instead (`previous_digest`: the ones the editor saw)."""

    arguments: str
    digest: str
    previous_digest: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Choice:
    """What a person chose, before the script stamps the time."""

    outcome: Outcome
    user_id: str | None = None
    user_name: str | None = None
    reason: str | None = None
    grant: GrantChoice | None = None
    edit: EditChoice | None = None
    team: str | None = None
    """The person's Slack team (for the audit trail), where known."""
    confirm: str | None = None
    """The value the approver typed for the call's `confirm` argument."""
    batch: str | None = None
    """Set when one submission decided every waiting call of the run ("Approve all"): the
    batch's id, in each call's audit entry."""
    outside: bool = False
    """The person is no full member of the installing workspace (`bot.slack.members`):
    refused unless the call's gate says `external`."""
    regate: str | None = None
    """With `edit`, when the edited call falls under a stricter rule: that rule's gate (JSON
    `CallGate`, `CallGate.regated_to`), which the script writes instead of approving."""
    in_channel: str | None = None
    """For a decision from the Home tab on a call anyone in its channel may decide: the call's
    channel (or a copy's) that the web process found the person in (`conversations.members`).
    Without it the script refuses such a decision there."""
    answer: str | None = None
    """With `answered` (**Answer instead**): what the model reads as the call's result."""
    note: str | None = None
    """With an approval (**Approve with a note…**): what the model reads after the output."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordResult:
    status: Status
    decision: Decision | None = None
    """The recorded decision, or for `decided` the one that won."""
    approvals: tuple[Approval, ...] = ()
    """For `counted`, `already_approved`, `open` and `stale`: the approvals so far."""
    resume_enqueued: bool = False
    edit: ArgumentEdit | None = None
    """For `counted` and `regated`: the edit this choice made (the count restarted on it)."""
    covered: tuple[tuple[str, Decision], ...] = ()
    """For an Approve always `recorded`: the other calls of the round under the same rule that
    it approved too (approval id, decision; `runtime/record/lua/always.lua`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallView:
    """What a decision needs to know about one approval, read in one round trip without the
    run's state. `envelope` and `call` are None when this version cannot read them."""

    run_id: str
    approval_id: str
    exists: bool
    round: str
    gate: CallGate | None
    envelope: RunEnvelope | None
    call: PendingCall | None


class UnconfirmedDecision(NotReplicated):
    """The script stored the choice (`result`), but the replicas did not confirm it in time:
    it must not be acknowledged yet, and it takes effect if they catch up."""

    def __init__(self, cause: NotReplicated, result: RecordResult) -> None:
        super().__init__(cause.confirmed, cause.wanted, cause.wait_ms)
        self.result = result


CONFIRMED: frozenset[Status] = frozenset(
    {"recorded", "counted", "already_approved", "decided", "regated"}
)
"""Replies that tell of a stored decision or approval: not given before the replicas have it."""

CHOSEN = frozenset(
    {"grant", "edit", "team", "confirm", "batch", "regate", "in_channel", "answer", "note"}
)
"""Left out of the script's choice JSON when absent (Lua's cjson.null is truthy)."""


class DecisionRecorder:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        replication: Replication = NO_REPLICAS,
        kept: KeptArguments | None = None,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self.redis, self.keys = redis, keys
        self._replication = replication
        self._kept = kept or KeptArguments()
        """What an `answered` entry keeps of the answer (`AUDIT_ARGS`, as of arguments)."""
        self._decide = rs.run_once(redis, rs.DECIDE)

    async def view(self, run_id: str, approval_id: str) -> CallView:
        stored = await read(self._redis, self._keys, CallRead, run_id, approval_id)
        try:
            return _view_of(stored, run_id, approval_id)
        except (UnreadableEnvelope, ValueError):
            # A field this version cannot parse (bytes that are not UTF-8, a number that is
            # not): as with a gate it cannot read, nobody decides the call here, and the person
            # is told to try again once a newer version runs.
            return CallView(
                run_id=run_id,
                approval_id=approval_id,
                exists=True,
                round="",
                gate=None,
                envelope=None,
                call=None,
            )

    async def decide(
        self,
        view: CallView,
        choice: Choice,
        *,
        channel: str,
        member_of: tuple[str, ...],
        seen: str | None,
    ) -> RecordResult:
        """Record a person's decision, made in `channel` (the card's, a copy's, or
        `run_record.HOME_TAB`); `member_of` are the groups of the call's gate that the person
        belongs to; `seen` the digest of the call as they were shown it (`stale` unless it is
        the call's current one)."""
        return await self._run(view, choice, channel, member_of, seen, mode="decide")

    async def check(
        self,
        view: CallView,
        user_id: str,
        *,
        channel: str,
        member_of: tuple[str, ...],
        seen: str | None,
        team: str | None = None,
        outside: bool = False,
        in_channel: str | None = None,
    ) -> RecordResult:
        """What a rejection by `user_id` would do now, recording nothing but a refusal."""
        choice = Choice(
            outcome="rejected", user_id=user_id, team=team, outside=outside, in_channel=in_channel
        )
        return await self._run(view, choice, channel, member_of, seen, mode="check")

    async def waiting_status(self, run_id: str) -> WaitingStatus | None:
        return await waiting_status(self._redis, self._keys, run_id)

    async def expire(self, view: CallView) -> RecordResult:
        """Record that nobody decided in time; refused unless the deadline has passed."""
        return await self._run(view, Choice(outcome="expired"), "", (), None, mode="expire")

    async def _run(
        self,
        view: CallView,
        choice: Choice,
        channel: str,
        member_of: tuple[str, ...],
        seen: str | None,
        *,
        mode: Literal["decide", "check", "expire"],
    ) -> RecordResult:
        run_id = view.run_id
        # Round 0 (nothing asked yet) is what a promoted replica may hold of a run whose card
        # was posted before its approvals reached the replica: no resume to offer then.
        round_ = int(view.round) if view.round.isdigit() else 0
        job = ResumeJob(run_id=run_id, round=round_) if round_ >= 1 else None
        sent: dict[str, object] = {
            k: v for k, v in asdict(choice).items() if v is not None or k not in CHOSEN
        }
        if choice.answer is not None:
            # Kept as `AUDIT_ARGS` says, its digest always (an edited output's, beside the held).
            digest = hashlib.sha256(choice.answer.encode()).hexdigest()
            kept = self._kept.fields(choice.answer, name="answer")
            sent["answer_kept"] = {**kept, "answer_digest": digest}
        # A grant covers the run's channel, wherever the decision came from (a copy, Home).
        run_channel = view.gate.channel if view.gate is not None else channel
        shard = self._keys.shard_of(run_id)
        # The resume goes where a worker that can read the run takes it (a rolling deploy).
        version = resume_version(view.envelope.conversation) if view.envelope else 1
        if choice.grant and mode == "decide":
            await note_grant_shard(self._redis, self._keys, run_channel, choice.grant.id)
        # The grant's id was drawn in the run's shard (`GrantKeys.new_id`): one slot.
        grant_keys = (
            [shard.grant(choice.grant.id), shard.channel_grants(run_channel)]
            if choice.grant
            else []
        )
        reply = await self._decide(
            rs.Decide(
                run=shard.run(run_id),
                deadlines=shard.deadlines,
                jobs=shard.job_streams[version - 1],
                audit=shard.audit,
                reminders=shard.reminders,
                tombstone=shard.tombstone(run_id),
                grant=grant_keys,
                approval_id=view.approval_id,
                choice=json.dumps(sent),
                where=channel,
                mode=mode,
                member=f"{run_id}:{view.approval_id}",
                run_id=run_id,
                groups=json.dumps(list(member_of)),
                job=job.model_dump_json() if job else "",
                round=view.round,
                denied_event=AuditEvent.DENIED,
                digest=seen or "",
            )
        )
        parts = [_text(p) or "" for p in reply]
        result = result_of(parts)
        if result.status == "regated":
            # The script put the call's nudges at now (the stricter rule's escalation may be
            # due): a sleeping poller hears of it at once, not at its next tick.
            await self._redis.xadd(
                shard.due_wake, {"due": "0"}, maxlen=WAKE_STREAM_LENGTH, approximate=True
            )
        if mode != "check" and result.status in CONFIRMED:
            # Also for a retry that finds its own decision, which an earlier attempt stored but
            # could not confirm: the retry succeeds once the replicas have it. Raises otherwise;
            # the decision (and its one resume job) stays stored.
            try:
                await self._replication.confirm()
            except NotReplicated as error:
                raise UnconfirmedDecision(error, result) from error
        return result

    async def confirm(self) -> None:
        """Once the replicas hold every write so far (`NotReplicated` or a `RedisError` if not
        within `REDIS_WAIT_MS`)."""
        await self._replication.confirm()


def result_of(parts: list[str]) -> RecordResult:
    """A decision-script reply, parsed (also each call's in a batch, `runtime.decisions.batch`)."""
    status = cast(Status, parts[0])
    try:
        if status in ("counted", "already_approved", "open", "stale", "regated"):
            approvals = tuple(Approval.model_validate(a) for a in json.loads(parts[1]))
            raw_edit = parts[2] if len(parts) > 2 else ""
            edit = ArgumentEdit.model_validate_json(raw_edit) if raw_edit else None
            return RecordResult(status=status, approvals=approvals, edit=edit)
        decision = Decision.model_validate_json(parts[1]) if len(parts) > 1 else None
        covered = json.loads(parts[3]) if len(parts) > 3 and parts[3] else []
        covering = tuple((aid, Decision.model_validate_json(raw)) for aid, raw in covered)
    except ValueError:
        # A decision, approvals or an edit that another version stored: as with a gate this
        # version cannot read, nobody decides the call here for now.
        return RecordResult(status="unreadable")
    return RecordResult(
        status=status,
        decision=decision,
        approvals=decision.approvals if decision else (),
        resume_enqueued=len(parts) > 2 and parts[2] == "1",
        covered=covering,
    )


def _text(value: bytes | str | int | None) -> str | None:
    if value is None:
        return None
    # A stored value another writer left undecodable stays unparseable (`result_of`).
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _view_of(stored: CallRead, run_id: str, approval_id: str) -> CallView:
    envelope, call = stored.envelope, None
    if envelope is not None and (found := envelope.call(approval_id)) is not None:
        call = found.model_copy(
            update={
                "message_ts": stored.message_ts,
                "copies": stored.copies or (),
                "edit": stored.edit,
            }
        )
    return CallView(
        run_id=run_id,
        approval_id=approval_id,
        exists=stored.exists,
        round=stored.round or "",
        gate=stored.gate,
        envelope=envelope,
        call=call,
    )
