"""Every script of the run record, declared: its keys and arguments by name and type (a
`ScriptCall` per script, named as the script's header names them), and its source as sent.

A caller builds the call with named values (`Claim(run=..., audit=..., kind=..., ...)`) and
hands it to the registered script (`run_once(redis, CLAIM)`, `once(redis, keys, STOP)`), which
turns it into KEYS and ARGV in order. Each script takes effect once per call, however often
redis-py sends it (`runtime.record.once`): the scripts of the run's own hash (`DECIDE` too)
keep their reply in it (`run_once`), the others under a token key (`once`). Two keep no reply:
`CREATE`, which writes only a run that does not exist yet, and `JOURNAL_PUT`, whose journal
field is its own mark; and `FENCED_WRITE`, the fenced write without an audit entry, is
`FENCED_SET` called to keep nothing (the same fields written again under the same fence are the
same hash)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.db.keys import HOME_CHANNELS, HOME_GROUPS, HOME_WAITING, LIVE_BY, Keys
from runtime.db.lua import C, Key, LuaConstant, MoreArgs, MoreKeys, Script, ScriptCall, declare
from runtime.record.layout import (
    APPROVALS,
    CHANNEL,
    COPIES,
    DEADLINE,
    DECISION,
    DENIED,
    EDIT,
    ENVELOPE,
    FENCE,
    FINAL,
    GATE,
    GATE_VERSION,
    HOME_TAB,
    JOURNAL,
    ONCE,
    PENDING,
    REACH,
    REQUESTER,
    ROUND,
    RULES,
    STARTED,
    STATE,
    STATUS,
    STOPPED,
    TURN,
)
from runtime.record.once import OnceScript, RunOnce, once_body

__all__ = [
    "ADD_COPIES",
    "CLAIM",
    "CLOSE",
    "CREATE",
    "DECIDE",
    "DECIDE_BATCH",
    "ESCALATE",
    "FENCED_SET",
    "FENCED_WRITE",
    "JOURNAL_PUT",
    "LUA_CONSTANTS",
    "RESTORE",
    "SCRIPTS",
    "START",
    "STOP",
    "WAIT",
    "AddCopies",
    "Claim",
    "Close",
    "Create",
    "Decide",
    "DecideBatch",
    "Escalate",
    "FencedSet",
    "JournalPut",
    "Restore",
    "Start",
    "Stop",
    "Wait",
    "once",
    "run_once",
]

LUA_CONSTANTS: Final[dict[str, LuaConstant]] = {
    "F": {
        "envelope": ENVELOPE,
        "state": STATE,
        "status": STATUS,
        "round": ROUND,
        "pending": PENDING,
        "fence": FENCE,
        "channel": CHANNEL,
        "requester": REQUESTER,
        "stopped": STOPPED,
        "rules": RULES,
        "deadline": DEADLINE,
        "gate": GATE,
        "approvals": APPROVALS,
        "denied": DENIED,
        "decision": DECISION,
        "edit": EDIT,
        "copies": COPIES,
        "reach": REACH,
        "turn": TURN,
        "once": ONCE,
        "final": FINAL,
    },
    "GATE_VERSION": GATE_VERSION,
    "HOME_WAITING": HOME_WAITING,
    "HOME_GROUPS": HOME_GROUPS,
    "HOME_CHANNELS": HOME_CHANNELS,
    "LIVE_BY": LIVE_BY,
    "HOME_TAB": HOME_TAB,
}
"""What every script of the record reads as Lua locals: the field names as the table `F`
(`F.status`), so that they are spelled once, here."""

_DECIDING: Final[dict[str, LuaConstant]] = {
    "EVENT_EDITED": AuditEvent.EDITED,
    "EVENT_GRANTED": AuditEvent.GRANTED,
    "EVENT_REGATED": AuditEvent.REGATED,
    "EVENT_OUTPUT_RELEASED": AuditEvent.OUTPUT_RELEASED,
    "EVENT_OUTPUT_WITHHELD": AuditEvent.OUTPUT_WITHHELD,
    "EVENT_OUTPUT_EDITED": AuditEvent.OUTPUT_EDITED,
}


def _declare(
    call: type[C],
    *fragments: str,
    contract: str | None = None,
    constants: Mapping[str, LuaConstant] | None = None,
    in_run: bool = False,
) -> Script[C]:
    """`runtime/record/lua/<fragment>.lua`, in order, after `LUA_CONSTANTS` and `constants`,
    in the frame that makes it take effect once (`in_run`: the one that keeps its reply in the
    run's hash, `RunOnce`)."""
    return declare(
        call,
        "runtime.record",
        *(("once_in_run", *fragments) if in_run else fragments),
        contract=contract or fragments[-1],
        constants={**LUA_CONSTANTS, **(constants or {})},
        frame=None if in_run else once_body,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Create(ScriptCall):
    run: Key
    tombstone: Key
    live_runs: Key
    ttl_seconds: int
    run_id: str
    fields: MoreArgs
    """field, value, field, value, ... of the new hash"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim(ScriptCall):
    run: Key
    audit: Key
    kind: str
    round: int
    ttl_seconds: int
    run_id: str
    event: str
    fence_step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FencedSet(ScriptCall):
    run: Key
    audit: Key
    fence: str
    """'' for writes that any holder may make"""
    entry: str
    """The audit entry (`AuditTrail.entry`), or ''."""
    fields: MoreArgs


@dataclass(frozen=True, slots=True, kw_only=True)
class Start(ScriptCall):
    run: Key
    fence: int
    call_id: str
    round: int
    run_again: str
    repeats: str
    stopping: str
    held: str
    turns: MoreArgs
    """field, value, ... of the model turns written with the mark"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait(ScriptCall):
    run: Key
    deadlines: Key
    reminders: Key
    due_wake: Key
    audit: Key
    fence: int
    expires_at: int
    plan: str
    state: bytes
    longest_sleep: float
    wake_length: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Close(ScriptCall):
    run: Key
    deadlines: Key
    reminders: Key
    tombstone: Key
    live_runs: Key
    audit: Key
    fence: str
    tombstone_seconds: int
    outcome: str
    keep: str
    run_id: str
    entry: str
    members: MoreArgs


@dataclass(frozen=True, slots=True, kw_only=True)
class JournalPut(ScriptCall):
    run: Key
    audit: Key
    once: Key
    field: str
    outcome: str
    entry: str
    once_seconds: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Restore(ScriptCall):
    run: Key
    audit: Key
    replid: str
    call_id: str
    outcome: str
    entry: str
    started_round: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Decide(ScriptCall):
    run: Key
    deadlines: Key
    jobs: Key
    audit: Key
    reminders: Key
    tombstone: Key
    grant: MoreKeys
    """Only with a grant: the grant's hash, then the channel's grants."""
    approval_id: str
    choice: str
    where: str
    mode: str
    member: str
    run_id: str
    groups: str
    job: str
    round: str
    denied_event: str
    digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DecideBatch(ScriptCall):
    run: Key
    deadlines: Key
    jobs: Key
    audit: Key
    reminders: Key
    calls: str
    choice: str
    where: str
    run_id: str
    job: str
    round: str
    denied_event: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop(ScriptCall):
    run: Key
    deadlines: Key
    reminders: Key
    audit: Key
    tombstone: Key
    live_runs: Key
    stops: Key
    who: str
    groups: str
    admins: str
    run_id: str
    event: str
    tombstone_seconds: int
    stopped_seconds: int
    stops_length: int
    where: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AddCopies(ScriptCall):
    run: Key
    approval_id: str
    copies: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalate(ScriptCall):
    run: Key
    audit: Key
    approval_id: str
    read_gate: bytes
    gate: str
    run_id: str
    event: str
    details: str


CREATE: Final = declare(Create, "runtime.record", "home_index", "create", constants=LUA_CONSTANTS)
"""Without the frame: the script itself writes nothing when the run exists (a copy of the call
answers 'exists', and `RunStore.create` reads the run either way)."""
CLAIM: Final = _declare(Claim, "home_index", "claim", in_run=True)
FENCED_SET: Final = _declare(FencedSet, "fenced_set", in_run=True)
FENCED_WRITE: Final = FENCED_SET
"""`FENCED_SET` called so that it keeps no reply (`run_once(..., keeps=False)`), for writes with
no audit entry (see `runtime.record.once`)."""
WAIT: Final = _declare(Wait, "home_index", "wait", in_run=True)
CLOSE: Final = _declare(Close, "home_index", "close", in_run=True)
JOURNAL_PUT: Final = declare(JournalPut, "runtime.record", "journal_put", constants=LUA_CONSTANTS)
"""Without a frame: the journal field is the call's own mark (see the script)."""
START: Final = _declare(
    Start, "start", constants={"JOURNAL": JOURNAL, "STARTED": STARTED}, in_run=True
)
"""A tool call's journal entry read and its start mark written, in one step."""
RESTORE: Final = _declare(Restore, "restore", constants={"JOURNAL": JOURNAL, "STARTED": STARTED})
"""What a failover lost of a tool call, written back by the worker that ran it."""
DECIDE: Final = _declare(
    Decide,
    "home_index",
    "choices",
    "batch_open",
    "decide",
    "always",
    contract="decide",
    constants=_DECIDING,
    in_run=True,
)
"""The decision script calls the functions of `choices.lua` (grants and edits); its body is a
function (`batch_open.lua`) that `always.lua` calls for each call an Approve always covers."""
DECIDE_BATCH: Final = _declare(
    DecideBatch,
    *("home_index", "choices", "batch_open", "decide", "batch"),
    contract="batch_open",
    constants=_DECIDING,
)
"""A batch ("Approve all") runs the decision script's body once per call (`batch_open.lua`)."""
STOP: Final = _declare(Stop, "home_index", "stop")
ADD_COPIES: Final = _declare(AddCopies, "home_index", "add_copies")
ESCALATE: Final = _declare(Escalate, "home_index", "escalate")

SCRIPTS: Final[dict[str, str]] = {
    "create": CREATE.source,
    "claim": CLAIM.source,
    "fenced_set": FENCED_SET.source,
    "wait": WAIT.source,
    "close": CLOSE.source,
    "journal_put": JOURNAL_PUT.source,
    "restore": RESTORE.source,
    "start": START.source,
    "decide": DECIDE.source,
    "decide_batch": DECIDE_BATCH.source,
    "stop": STOP.source,
    "add_copies": ADD_COPIES.source,
    "escalate": ESCALATE.source,
}
"""Every script of the run record, by name, as sent to Redis (`/readyz` loads each:
`runtime.readiness`)."""


def once(redis: aioredis.Redis, keys: Keys, script: Script[C]) -> OnceScript[C]:
    """One of the record's scripts, registered on `redis`."""
    return OnceScript(redis, keys, script)


def run_once(redis: aioredis.Redis, script: Script[C], *, keeps: bool = True) -> RunOnce[C]:
    """One of the record's scripts of the run's hash (`in_run`), registered on `redis`."""
    return RunOnce(redis, script, keeps=keeps)
