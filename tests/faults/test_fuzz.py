"""10,000 signed but malformed or hostile payloads at the real web process, and hostile stored
records under it.

Slack signs whatever it sends, so the signature proves only the sender; everything inside may
still be wrong: types, missing fields, huge strings, unknown actions, ids of other runs or
channels, replays of real decisions. Half the payloads are Slack's real shapes (every event the
app subscribes to, its interactions: `tests/support/slack_shapes.py`) with some of their fields
broken.
After all of them: no 5xx, no process crashed, the real waiting approvals are still undecided
(the fuzz never pairs their ids with their channel), and every Redis key Countersign created for
a run has a TTL. Then the records: each field of a waiting run's hash overwritten with something
a newer, older or broken writer could have left, and its card clicked from its own channel:
never a 5xx, never a crashed web or worker.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import slack_shapes as shapes
from tests.support.background_loop import Background
from tests.support.deployment import Deployment
from tests.support.fake_slack import Message
from tests.support.harness import SIGNING_SECRET
from tests.support.model_scripts import delete_then_answer
from tests.support.slack_requests import signature_headers
from tests.support.slack_shapes import (
    ACTION_IDS,
    CALLBACKS,
    EVENTS,
    envelope,
    hostile_values,
    mutated,
)

PER_EXAMPLE = 20
EXAMPLES = int(os.environ.get("FUZZ_PAYLOADS", "10000")) // PER_EXAMPLE


class Target:
    """The deployment under fuzz, plus the real cards the fuzz must not be able to decide."""

    def __init__(self, deployment: Deployment, background: Background, cards: list[Message]):
        self.deployment = deployment
        self.background = background
        self.cards = cards
        self.url = f"http://127.0.0.1:{deployment.port}/slack/events"
        self.real_ids = [c.actions()[0]["value"] for c in cards]
        self.statuses: list[int] = []


@contextlib.contextmanager
def waiting_runs(redis_url: str, folder: Path, runs: int) -> Iterator[Target]:
    """The Procfile's web and a worker, and `runs` runs each waiting on one card."""
    background = Background()
    # A prefix of its own: two runs of this file (two checkouts, parallel workers) share a Redis.
    deployment = Deployment(redis_url, f"fuzz-{uuid.uuid4().hex[:8]}:", folder)

    async def setup() -> list[Message]:
        await deployment.start()
        deployment.model.script = delete_then_answer
        await deployment.web()
        deployment.worker("worker.1")
        roots = [await deployment.start_run(f"delete u-100 ({n})") for n in range(runs)]
        return [(await deployment.cards(root, 1))[0] for root in roots]

    cards = background.run(setup())
    try:
        yield Target(deployment, background, cards)
    finally:
        background.run(deployment.stop())
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{deployment.keys.prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
        background.close()


@pytest.fixture(scope="module")
def target(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with waiting_runs(redis_url, tmp_path_factory.mktemp("fuzz"), 3) as found:
        yield found


def post(url: str, body: bytes, content_type: str) -> int:
    headers = signature_headers(SIGNING_SECRET, body.decode("utf-8", "surrogatepass"))
    headers["Content-Type"] = content_type
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


# --- what hostile payloads are made of -------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)
ids = st.sampled_from(["U0001", "UEVE", "", "U" * 300, "C0001", "CFUZZ", "null", "<!channel>"])
action_ids = st.sampled_from(
    ["approve", "approve_always", "reject", "view_arguments", "launch", "", "a" * 300]
)
huge = st.integers(min_value=1000, max_value=200_000).map(lambda n: "x" * n)


@st.composite
def button_values(draw: st.DrawFn, real_ids: list[str]) -> Any:
    real = draw(st.sampled_from(real_ids))
    run_id, approval_id = real.split(":")[:2]
    return draw(
        st.one_of(
            st.just(real),  # a real approval... always sent from the wrong channel below
            st.just(f"{run_id}:a0000000000"),
            st.just(f"r0000000000000000:{approval_id}"),
            st.just(real + ":extra"),
            st.text(max_size=80),
            huge,
            json_values,
        )
    )


@st.composite
def block_actions(draw: st.DrawFn, real_ids: list[str]) -> dict[str, Any]:
    action = {
        "type": "button",
        "action_id": draw(action_ids),
        "value": draw(button_values(real_ids)),
    }
    payload: dict[str, Any] = {
        "type": draw(st.sampled_from(["block_actions", "block_actions", "interactive_message"])),
        "user": draw(
            st.one_of(st.fixed_dictionaries({"id": ids, "username": st.text()}), json_values)
        ),
        # Never the real cards' channel: from anywhere else, real ids must not count.
        "channel": {"id": draw(st.sampled_from(["CFUZZ", "COTHER", "", "D0001"]))},
        "container": {"message_ts": draw(st.one_of(st.just("1700000003.000100"), st.text()))},
        "actions": draw(st.one_of(st.just([action]), st.lists(json_values, max_size=3))),
        "trigger_id": draw(st.text(max_size=30)),
    }
    for key in draw(st.lists(st.sampled_from(list(payload)), max_size=3)):
        payload.pop(key, None)  # missing fields
    return payload


@st.composite
def view_submissions(draw: st.DrawFn, real_ids: list[str]) -> dict[str, Any]:
    run_id, approval_id = draw(st.sampled_from(real_ids)).split(":")[:2]
    metadata = draw(
        st.one_of(
            st.just(json.dumps({"run_id": run_id, "approval_id": approval_id, "channel": "CFUZZ"})),
            st.text(max_size=100),
            json_values.map(json.dumps),
        )
    )
    return {
        "type": "view_submission",
        "user": {"id": draw(ids)},
        "view": {
            "callback_id": draw(st.sampled_from(["reject_reason", "other", ""])),
            "private_metadata": metadata,
            "state": {"values": draw(json_values)},
        },
    }


def slash_commands() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "command": st.sampled_from(["/agent", "/other", ""]),
            "user_id": ids,
            "channel_id": ids,
            "text": st.one_of(st.text(max_size=200), huge, st.sampled_from(["audit r0", "help"])),
            "trigger_id": st.text(max_size=40),
        },
        optional={"response_url": st.sampled_from(["http://127.0.0.1:1/", "nonsense"])},
    )


@st.composite
def shaped(draw: st.DrawFn, real_ids: list[str]) -> tuple[bytes, str]:
    """One of Slack's real payloads, some of its fields broken (`tests.support.slack_shapes`)."""
    kind = draw(st.sampled_from(["event", "action", "action", "view", "command"]))
    form = "application/x-www-form-urlencoded"
    if kind == "event":
        body = draw(mutated(envelope(draw(st.sampled_from(EVENTS)))))
        return json.dumps(body).encode(), "application/json"
    if kind == "command":
        command = draw(mutated(dict(draw(slash_commands()))))
        fields = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in command.items()}
        return urlencode(fields).encode(), form
    real = draw(st.sampled_from(real_ids))
    run_id, approval_id = real.split(":")[:2]
    if kind == "view":
        meta = json.dumps({"run_id": run_id, "approval_id": approval_id, "channel": "CFUZZ"})
        payload = draw(mutated(shapes.view_submission(draw(st.sampled_from(CALLBACKS)), meta)))
    else:
        payload = draw(mutated(shapes.block_actions(draw(st.sampled_from(ACTION_IDS)), real)))
    return urlencode({"payload": json.dumps(payload)}).encode(), form


@st.composite
def requests(draw: st.DrawFn, real_ids: list[str]) -> tuple[bytes, str]:
    if draw(st.booleans()):
        return draw(shaped(real_ids))
    kind = draw(st.sampled_from(["action", "action", "view", "command", "event", "junk"]))
    if kind == "command":
        return urlencode(draw(slash_commands())).encode(), "application/x-www-form-urlencoded"
    if kind == "event":
        event = {"type": "event_callback", "event": draw(json_values), "event_id": "Ev1"}
        return json.dumps(event).encode(), "application/json"
    if kind == "junk":
        body = draw(st.one_of(st.binary(max_size=500), huge.map(str.encode)))
        return body.decode("utf-8", "replace").encode(), draw(
            st.sampled_from(["application/x-www-form-urlencoded", "application/json", "text/plain"])
        )
    payload = draw(block_actions(real_ids) if kind == "action" else view_submissions(real_ids))
    return urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded"


# --- the test ------------------------------------------------------------------------------------


@pytest.mark.chaos  # about a minute of signed requests: CI runs it, `-m "not chaos"` skips it
@pytest.mark.timeout(900)
def test_ten_thousand_hostile_payloads(target: Target) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(batch=st.lists(requests(target.real_ids), min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def fuzz(batch: list[tuple[bytes, str]]) -> None:
        for body, content_type in batch:
            status = post(target.url, body, content_type)
            target.statuses.append(status)
            assert status < 500, (status, body[:300])

    started = time.monotonic()
    fuzz()
    elapsed = time.monotonic() - started
    deployment = target.deployment
    assert len(target.statuses) >= EXAMPLES * PER_EXAMPLE
    assert all(p.popen.poll() is None for p in deployment.processes), deployment.logs_text()
    counts = collections.Counter(target.statuses)
    print(f"\n{len(target.statuses)} payloads in {elapsed:.1f} s, statuses {dict(counts)}")

    async def check() -> None:
        redis_client = deployment.redis
        for card in target.cards:
            assert card.action_ids() == [
                "approve",
                "approve_note",
                "approve_always",
                "reject",
                "answer",
            ], "undecided"
        decided: Any = await redis_client.xrange(deployment.keys.audit)
        events = {fields[b"event"] for _, fields in decided}
        assert not events & {b"approved", b"approved_always", b"rejected"}
        shared = {
            *deployment.keys.only.job_streams,
            deployment.keys.dead_jobs,
            deployment.keys.deadlines,
            deployment.keys.reminders,
            deployment.keys.audit,
            deployment.keys.live_runs,
            deployment.keys.due_wake,
            deployment.keys.home.viewers,  # who opened the Home tab: pruned by age, no run's
            deployment.ledger_key,
        }
        async for key in redis_client.scan_iter(match=f"{deployment.keys.prefix}*"):
            name = key.decode()
            if name not in shared:
                # -1: no TTL. (TTL in seconds reads 0 for a debounce key with 400 ms left, and
                # -2 for one that expired since the scan: both go on their own.)
                assert await redis_client.pttl(key) != -1, f"{name} has no TTL"

    target.background.run(check())


# --- deep bodies and events of unexpected shapes ------------------------------------------

DEEP = 100_000


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("[" * DEEP + "]" * DEEP, "application/json"),
        (
            json.dumps(envelope({"type": "app_mention", "text": "?"})).replace(
                '"?"', "[" * 5000 + "]" * 5000
            ),
            "application/json",
        ),
        (urlencode({"payload": "[" * DEEP + "]" * DEEP}), "application/x-www-form-urlencoded"),
    ],
    ids=["json", "a-field", "form-payload"],
)
def test_a_body_nested_too_deep_is_refused_with_a_4xx(
    target: Target, body: str, content_type: str
) -> None:
    assert post(target.url, body.encode(), content_type) < 500
    assert all(p.popen.poll() is None for p in target.deployment.processes)


def test_an_event_of_an_unexpected_shape_is_answered_200(target: Target) -> None:
    body = json.dumps(envelope({"type": "subteam_updated", "subteam": "S0ONCALL"}))
    assert post(target.url, body.encode(), "application/json") == 200


# --- stored records ---------------------------------------------------------------------------

RECORD_EXAMPLES = int(os.environ.get("FUZZ_RECORDS", "400"))
CLICKS = ("approve", "approve_always", "reject", "view_arguments", "approve_typed")
CLICKERS = ("UALICE", "UALICE", "UALICE", "UALICE", "UALICE", "UALICE", "UBOB")
"""Mostly the requester, whom the whole gate refuses at its end (a decision ends the run)."""


@pytest.fixture(scope="module")
def records(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with waiting_runs(redis_url, tmp_path_factory.mktemp("records"), 8) as found:
        yield found


@pytest.mark.timeout(600)
def test_hostile_stored_records_never_answer_5xx_nor_crash_a_process(records: Target) -> None:
    """Each example overwrites one field of a waiting run's hash (the envelope, a gate, a
    deadline, a decision, the status, ...) with what another version or a broken writer could
    leave, clicks the run's card from its own channel, and puts the field back."""
    deployment = records.deployment

    async def clicked(
        card: Message, ref: str, field: bytes, value: bytes, action: str, user: str
    ) -> int:
        key = deployment.keys.run(ref.split(":")[0])
        before: Any = await deployment.redis.hget(key, field)
        if before is None:
            return 200  # the run ended (a click decided it): nothing to corrupt
        await deployment.redis.hset(key, field, value)
        try:
            status, _ = await deployment.sender.click(card, action, user=user, value=ref)
        finally:
            if await deployment.redis.exists(key):
                await deployment.redis.hset(key, field, before)
        return status

    async def fields_of(ref: str) -> list[bytes]:
        found: Any = await deployment.redis.hkeys(deployment.keys.run(ref.split(":")[0]))
        return sorted(found)

    statuses: list[int] = []

    @settings(
        max_examples=RECORD_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        pick=st.integers(0, 1000),
        field_pick=st.integers(0, 1000),
        value=st.one_of(
            hostile_values.map(lambda v: json.dumps(v).encode()),
            st.binary(max_size=64),
            st.sampled_from([b"", b"{}", b'{"schema_version": 99}', b"null", b"waiting", b"-1"]),
        ),
        action=st.sampled_from(CLICKS),
        user=st.sampled_from(CLICKERS),
    )
    def corrupt(pick: int, field_pick: int, value: bytes, action: str, user: str) -> None:
        number = pick % len(records.cards)
        card, ref = records.cards[number], records.real_ids[number]
        fields = records.background.run(fields_of(ref))
        if not fields:
            return  # the run ended: a click decided it
        field = fields[field_pick % len(fields)]
        status = records.background.run(clicked(card, ref, field, value, action, user))
        statuses.append(status)
        assert status < 500, (field, value[:200], action)

    corrupt()
    assert all(p.popen.poll() is None for p in deployment.processes), deployment.logs_text()
    print(
        f"\n{len(statuses)} clicks on corrupted records, statuses {collections.Counter(statuses)}"
    )
