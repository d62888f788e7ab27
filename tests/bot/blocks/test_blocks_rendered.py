"""Every card, message, modal and Home tab the bot builds, rendered as Slack receives it and
compared with `tests/bot/blocks/blocks_rendered.json`: a change to a builder that changes what
Slack shows
fails here, case by case, with the block that differs.

What is compared is what the Slack clients send (`slack_sdk`'s Web API and webhook clients and
Bolt's `ack` turn a Block Kit model into JSON with its `to_dict()`, which also runs the model's
validation), written with sorted keys: the order of keys in a JSON object means nothing to Slack,
everything else (each value, each list's order, which keys are there) is compared exactly. A text
longer than `SHORTENED` is recorded as its length, its SHA-256 and its two ends, which keeps the
file readable and still tells any change.

After a change meant to alter what Slack shows, write the file again and read its diff:
`.venv/bin/python -m tests.bot.blocks.test_blocks_rendered`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.models.basic_objects import JsonObject

from bot.blocks.batch import batch_listing, batch_modal
from bot.blocks.cards import (
    answer_modal,
    approval_decided_blocks,
    approval_request_blocks,
    arguments_modal,
    note_modal,
    reject_modal,
)
from bot.blocks.commands import did_you_mean_blocks
from bot.blocks.confirmations import confirm_modal
from bot.blocks.edits import edit_modal
from bot.blocks.grants import grant_used_blocks, grants_listing_blocks
from bot.blocks.status import status_blocks
from bot.home.blocks import OwnRun, WaitingCall, home_view
from runtime.grants import Grant
from runtime.jobs.contracts import Conversation
from runtime.record.choices import ArgumentEdit, GrantRef
from runtime.record.envelope import Approval, Decision, PendingCall, UnjudgedRule
from runtime.reporter import RunView
from runtime.runs import LiveRun

RENDERED = Path(__file__).with_name("blocks_rendered.json")
SHORTENED = 300

RUN = RunView(
    run_id="r0123456789abcdef",
    agent="ops",
    task="delete the user u-100 and their projects",
    conversation=Conversation(channel="C1", requester="UALICE", thread="1.1"),
)
LONG_RUN = RunView(
    run_id="r00000000000000ff",
    agent="billing",
    task="refund " * 80,
    conversation=Conversation(channel="C2", requester="UCAROL", thread="2.2"),
)
DIGEST = "d" * 64
HUGE = json.dumps({"rows": [f"row-{n}-<&>" for n in range(3000)]})
ONE_LINE = json.dumps({"note": " ".join(["word"] * 2000)}, separators=(",", ":"))
HOSTILE = json.dumps({"text": "```<!channel> & <@U1> ``` *bold* `tick`", "n": 1})
SCHEMA = {"type": "object", "properties": {"user_id": {"type": "string"}}}
EDIT = ArgumentEdit(
    arguments='{"user_id": "u-200"}',
    digest="e" * 64,
    previous_digest=DIGEST,
    user_id="UBOB",
    at=1_700_000_000.0,
)
APPROVALS = (Approval(user_id="UBOB", outcome="approved", at=1_700_000_000.0),)


def call(arguments: str = '{"user_id":"u-100","hard":true}', **changes: Any) -> PendingCall:
    base = PendingCall(
        approval_id="a0123456789",
        call_id="call_1",
        tool="delete_user",
        agent="ops",
        arguments=arguments,
        expires_at=1_800_000_000.0,
        digest=DIGEST,
    )
    return base.model_copy(update=changes)


def decided(outcome: str, **changes: Any) -> Decision:
    fields: dict[str, Any] = {"user_id": "UBOB", "decided_at": 1_700_000_100.0, "digest": DIGEST}
    return Decision.model_validate({"outcome": outcome, **fields, **changes})


def grant(n: int) -> Grant:
    return Grant(
        id=f"g{n:010x}",
        scope="arguments" if n % 2 else "tool",
        channel="C1",
        agent="ops",
        tool=f"tool_{n}",
        user_id="UBOB",
        at=1_700_000_000.0,
        ends_at=1_700_003_600.0 + n,
        seconds=3600,
        run_id=RUN.run_id,
        approval_id="a0123456789",
        uses=n,
    )


def live_run(n: int, state: str = "waiting") -> LiveRun:
    return LiveRun(
        run_id=f"r{n:016x}",
        agent="ops",
        task=f"task number {n} " * (n % 3 + 1),
        channel="C1",
        requester="UALICE",
        thread="1.1",
        state=state,  # type: ignore[arg-type]
        pending=n % 3,
        age_seconds=60.0 * n,
        approvals_needed=n % 4,
        always=(("delete_user", "UBOB"),) if n == 2 else (),
    )


EVERYTHING = call(
    approvers=("UALICE", "UBOB", "S0SRE"),
    quorum=2,
    approvals=APPROVALS,
    mcp_server="db",
    description="Deletes a user and everything they own.",
    inside=("triage", "cleanup"),
    when="args.hard == true",
    rule_name="hard deletes",
    unjudged=(UnjudgedRule(rule="regional", reason="the call has no `region`"),),
    invalid="`hard`: Input should be a valid boolean",
    why="The user asked me to delete u-100 for good.",
    preview="Would delete u-100 (Ada Lovelace) and 3 projects.",
    edit=EDIT,
)
OFFERED = call(
    approvers=("UALICE",),
    allow_edit=True,
    params_schema=SCHEMA,
    grant_max_seconds=86_400,
    why="w" * 4000,
    preview="p" * 4000,
)
EDITED = call(
    decision=decided(
        "approved",
        digest=EDIT.digest,
        edit=EDIT,
        approvals=APPROVALS,
        granted=GrantRef(id="g0123456789", scope="tool", ends_at=1_700_003_600.0, user_id="UBOB"),
    ),
    edited_preview="Would delete u-200 (Grace Hopper) and 1 project.",
)
BATCH = [
    call(approval_id="a0000000001", tool="delete_user"),
    call("{}", approval_id="a0000000002", tool="restart_service", digest=""),
    call(HUGE, approval_id="a0000000003", tool="import_rows"),
    call(HOSTILE, approval_id="a0000000004", tool="post_note", edit=EDIT),
]
WAITING = [WaitingCall(run=RUN, call=call(approval_id=f"a{n:010x}"), link=None) for n in range(22)]
WAITING[0] = WaitingCall(run=RUN, call=EVERYTHING, link="https://slack.example/archives/C1/p1")
WAITING[1] = WaitingCall(run=LONG_RUN, call=call(HUGE, allow_always=False, digest=""), link=None)
RUNS = [
    OwnRun(run=live_run(n, "stopping" if n == 3 else "waiting"), link=f"https://l/{n}")
    for n in range(17)
]


def decided_card(outcome: str) -> Any:
    return approval_decided_blocks(RUN, call(decision=decided(outcome)))


Render = Callable[[], Any]
CASES: dict[str, Render] = {
    "card/plain": lambda: approval_request_blocks(RUN, call()),
    "card/no-arguments": lambda: approval_request_blocks(RUN, call("{}", digest="")),
    "card/not-json": lambda: approval_request_blocks(RUN, call("not json {")),
    "card/hostile": lambda: approval_request_blocks(RUN, call(HOSTILE)),
    "card/huge": lambda: approval_request_blocks(RUN, call(HUGE, preview="")),
    "card/everything": lambda: approval_request_blocks(RUN, EVERYTHING, ["UBOB", "S0SRE"], "ops"),
    "card/grant-menu-and-edit": lambda: approval_request_blocks(LONG_RUN, OFFERED, [], "demo"),
    "card/grant-menu-no-channel": lambda: approval_request_blocks(
        RUN, call(grant_max_seconds=900), ["UBOB"]
    ),
    "card/schema-invalid": lambda: approval_request_blocks(
        RUN, call(allow_edit=True, params_schema={"type": 12})
    ),
    "card/takes-nothing": lambda: approval_request_blocks(
        RUN, call("{}", allow_edit=True, params_schema={"type": "object"})
    ),
    "card/lost-confirm": lambda: approval_request_blocks(
        RUN, call(lost=True, confirm="user_id", allow_always=False), ["UBOB"]
    ),
    "card/quorum-anyone": lambda: approval_request_blocks(RUN, call(quorum=3, approvals=APPROVALS)),
    **{
        f"decided/{outcome}": partial(decided_card, outcome)
        for outcome in ("approved", "approved_always", "expired", "stopped")
    },
    "decided/rejected": lambda: approval_decided_blocks(
        RUN, call(decision=decided("rejected", reason="not *now* <!here>" + "r" * 2000))
    ),
    "decided/answered": lambda: approval_decided_blocks(
        RUN, call(decision=decided("answered", answer="gone *already* <!here>" + "&" * 2970))
    ),
    "decided/approved-with-notes": lambda: approval_decided_blocks(
        RUN,
        call(
            decision=decided(
                "approved",
                approvals=[
                    {"user_id": "UBOB", "outcome": "approved", "at": 1.0, "note": "<!here> once"},
                    {"user_id": "UCAROL", "outcome": "approved", "at": 2.0},
                    {"user_id": "UDAVE", "outcome": "approved", "at": 3.0, "note": "n" * 500},
                ],
            )
        ),
    ),
    "decided/by-policy": lambda: approval_decided_blocks(
        RUN, call(decision=decided("approved", user_id=None, by_policy=True))
    ),
    "decided/edited-granted": lambda: approval_decided_blocks(RUN, EDITED),
    "decided/huge-mcp": lambda: approval_decided_blocks(
        RUN, call(HUGE, mcp_server="db", decision=decided("approved"))
    ),
    "decided/no-arguments": lambda: approval_decided_blocks(
        RUN, call("{}", digest="", decision=decided("expired", user_id=None))
    ),
    "modal/reject": lambda: reject_modal(call(), '{"m": 1}', "UALICE"),
    "modal/answer": lambda: answer_modal(call(), '{"m": 1}', "UALICE"),
    "modal/note": lambda: note_modal(call(), '{"m": 1}', None),
    "modal/reject-nobody": lambda: reject_modal(EVERYTHING, "m" * 500, None),
    "modal/arguments": lambda: arguments_modal(call(HOSTILE)),
    "modal/arguments-huge": lambda: arguments_modal(call(HUGE)),
    "modal/arguments-one-line": lambda: arguments_modal(call(ONE_LINE, digest="")),
    "modal/edit": lambda: edit_modal(call(edit=EDIT), '{"m": 2}'),
    "modal/confirm": lambda: confirm_modal(call(confirm="user_id"), '{"m": 3}'),
    "modal/confirm-none": lambda: confirm_modal(call(), '{"m": 3}'),
    "modal/approve-all": lambda: batch_modal(
        batch_listing(BATCH, approving=True), '{"m": 4}', approving=True
    ),
    "modal/reject-all": lambda: batch_modal(
        batch_listing(BATCH[:2], approving=False), '{"m": 5}', approving=False
    ),
    **{
        f"status/{state}": partial(status_blocks, RUN.run_id, f"*{state}*\n• called `x`", state)
        for state in ("working", "waiting", "done", "failed", "stopped")
    },
    "status/waiting-batch": lambda: status_blocks(RUN.run_id, "x" * 3000, "waiting", batch=True),
    "status/working-batch": lambda: status_blocks(RUN.run_id, "w", "working", batch=True),
    "command/did-you-mean": lambda: did_you_mean_blocks(
        "Did you mean `/agent help`?", '{"task": "hlep"}'
    ),
    "grant/used": lambda: grant_used_blocks("Approved by a grant of <@UBOB>", "g0123456789"),
    "grant/listing-one": lambda: grants_listing_blocks([grant(1)]),
    "grant/listing-fifty": lambda: grants_listing_blocks([grant(n) for n in range(50)]),
    "home/empty": lambda: home_view([], []),
    "home/one-each": lambda: home_view(WAITING[:1], RUNS[:1]),
    "home/full": lambda: home_view(WAITING, RUNS, more_waiting=7, about=True, more_runs=2),
    "home/more-runs": lambda: home_view(WAITING[1:3], RUNS[:4], more_waiting=1, more_runs=30),
}


def as_sent(value: Any) -> Any:
    """What the Slack clients send for `value`: a Block Kit model as its `to_dict()`."""
    if isinstance(value, JsonObject):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [as_sent(item) for item in value]
    if isinstance(value, dict):
        return {key: as_sent(item) for key, item in value.items()}
    return value


def recordable(value: Any) -> Any:
    """`value` with each text longer than `SHORTENED` written as its length, hash and ends."""
    if isinstance(value, str) and len(value) > SHORTENED:
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        return f"{len(value)} chars, sha256 {digest}: {value[:60]!r} … {value[-30:]!r}"
    if isinstance(value, list):
        return [recordable(item) for item in value]
    if isinstance(value, dict):
        return {key: recordable(item) for key, item in value.items()}
    return value


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=1)


def rendered(name: str) -> str:
    return canonical(recordable(as_sent(CASES[name]())))


def recorded() -> dict[str, str]:
    found: dict[str, Any] = json.loads(RENDERED.read_text())
    return {name: canonical(value) for name, value in found.items()}


def test_every_builder_has_a_recorded_rendering() -> None:
    assert sorted(recorded()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_builder_renders_what_was_recorded(name: str) -> None:
    assert rendered(name) == recorded()[name]


def write() -> None:
    every = {name: json.loads(rendered(name)) for name in sorted(CASES)}
    RENDERED.write_text(canonical(every) + "\n")
    print(f"{RENDERED}: {len(every)} renderings", file=sys.stderr)


if __name__ == "__main__":
    write()
