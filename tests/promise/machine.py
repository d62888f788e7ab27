"""The state machine: generated histories of runs, clicks, time and faults on the real runtime.

Each step is something a person or the world does: start a run whose model asks for some calls,
click a card (current or stale) as someone who may or may not decide, stop a run, revoke a
grant, let time pass on Redis's clock, make the model fail, kill the worker inside a tool or a
model request, restart Redis. After each step the machine waits until the runtime has settled,
tells the reference model (`tests.promise.reference`) what the people saw, and checks every
invariant over the whole history: the tool's own log, the audit trail and the threads.

A violation whose kind is listed in `KNOWN` is counted (`Stats.known`) and the sequence goes on:
each is a defect being fixed elsewhere, reproduced by a regular test that is expected to fail
until its fix lands (`tests/test_promise_model.py`). Any other violation fails the sequence,
and Hypothesis shrinks it to a minimal one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from tests.promise import world
from tests.promise.reference import (
    Card,
    Click,
    ClickKind,
    Reference,
    Run,
    ThreadFacts,
    Violation,
    received,
    rule_for,
)
from tests.promise.rig import SETTLE_SECONDS, ClockedRedis, Rig
from tests.support.background_loop import Background
from tests.support.fake_slack import Message

KNOWN: tuple[tuple[str, str], ...] = ()
"""Violation kinds already filed (a pattern of `Violation.kind`, the issue item it reproduces):
counted, not failed. Remove a line once its fix has landed: its regular test in
tests/test_promise_model.py then passes, and must lose its xfail mark too."""


def known(kind: str) -> str | None:
    """The filed issue item a violation kind reproduces, if any."""
    return next((item for pattern, item in KNOWN if re.search(pattern, kind)), None)


class PromiseBroken(AssertionError):
    """A history broke the promise in a way already filed (`KNOWN`)."""


TRACE = bool(os.environ.get("PROMISE_TRACE"))
"""Print what each step left behind (the ledger, the trail's events), to watch a sequence."""
SURVEY = bool(os.environ.get("PROMISE_SURVEY"))
"""Count every violation as if known (fail on none): to see which kinds the code has."""
LOST = "may have run; its result was lost"
WORLD_EVENTS = (
    "time passes",
    "time passes",
    "model 5xx",
    "worker killed in a tool",
    "worker killed in a model request",
    "Redis restarted",
)
TIME_STEPS = (60, 130, 310, 3700, 28900)
"""Seconds: a minute; past an escalation (120 s); past a card's deadline (300 s); past a grant
of one hour; past one of eight."""


@dataclass
class Stats:
    steps: int = 0
    sequences: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    known: Counter[str] = field(default_factory=Counter)
    """Known violation kind -> sequences it was seen in."""
    found: list[str] = field(default_factory=list)
    """New violations, as the failing step reported them."""
    stuck: int = 0
    broken: int = 0
    """Sequences that broke the promise (a known way or a new one)."""
    examples: dict[str, str] = field(default_factory=dict)
    """One violation of each known kind, as found."""

    def summary(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"
        lines = [
            f"steps run: {self.steps}",
            f"sequences tried: {self.sequences}",
            f"faults injected: {sum(self.faults.values())} ({faults})",
            f"steps that did not settle in {SETTLE_SECONDS:.0f} s: {self.stuck}",
        ]
        for kind, count in sorted(self.known.items()):
            lines.append(f"known violation {kind} ({known(kind)}): {count} sequence(s)")
        return "\n".join(lines)


STATS = Stats()


class Session:
    """What every sequence shares: the event loop, the Redis whose clock moves, a folder."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="promise-model-"))
        self.background = Background()
        self.redis = ClockedRedis(self.folder)
        self.redis.start()

    def close(self) -> None:
        self.redis.stop()
        self.background.close()


_session: Session | None = None


def session() -> Session:
    global _session
    if _session is None:
        _session = Session()
        atexit.register(close_session)
    return _session


def close_session() -> None:
    global _session
    if _session is not None:
        _session.close()
        _session = None


@dataclass
class SeenCard:
    message: Message
    approval_id: str
    ref: str
    """`run_id:approval_id:...`, as the buttons carry it."""
    values: dict[str, str]
    """Action id -> value, as first drawn (a stale card still has them on someone's screen)."""
    grants: dict[str, str]
    """Grant menu: (scope, seconds) as `scope:seconds` -> option value."""
    edit: str | None


@dataclass
class SeenRun:
    tag: str
    root: Message | None = None
    stop_value: str | None = None


ACTIONS = (
    "approve",
    "approve",
    "always",
    "always",
    "reject",
    "answer",
    "note",
    "grant:tool:3600",
    "grant:tool:28800",
    "grant:arguments:86400",
    "typed",
    "typed-wrong",
    "edit",
)
TEXTS: dict[str, ClickKind] = {"reject": "reject", "answer": "answer", "note": "note"}
"""The actions whose modal asks one text, and what the reference calls each."""
CALL_CHOICES = [(tool, arguments) for tool, choices in world.CALLS.items() for arguments in choices]


def _calls_of(tool: str | None) -> st.SearchStrategy[world.PlannedCall]:
    choices = [c for c in CALL_CHOICES if tool is None or c[0] == tool]
    return st.sampled_from(choices).map(lambda c: world.PlannedCall(c[0], dict(c[1])))


def _plans(tool: str) -> st.SearchStrategy[list[list[world.PlannedCall]]]:
    """Turns that mostly call one tool: a later call of the tool an earlier card decided is
    where standing approvals (always, grants) meet other rules."""
    calls = st.one_of(_calls_of(tool), _calls_of(tool), _calls_of(None))
    return st.lists(st.lists(calls, min_size=1, max_size=2), min_size=1, max_size=4)


turns = st.sampled_from(sorted(world.CALLS)).flatmap(_plans)
people = st.sampled_from(
    ("UALICE", "UBOB", "UBOB", "UCAROL", "UCAROL", world.GUEST, world.STRANGER)
)
requesters = st.sampled_from(("UALICE", "UALICE", "UALICE", "UBOB", world.GUEST, world.STRANGER))


class PromiseMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.session = session()
        self.rig: Rig | None = None
        self.reference = Reference(policy="strict")
        self.cards: list[SeenCard] = []
        self.runs: dict[str, SeenRun] = {}
        self.lines: list[tuple[Message, str]] = []
        """Grant lines (a call approved by a grant) with their Revoke value."""
        self._tags = itertools.count(1)
        self.reported: set[tuple[str, str]] = set()
        self._broken = False
        self.expected: str | None = None
        """A regular test's issue item (`known`): only that item's violations raise
        `PromiseBroken`, and any other violation fails as a new one."""
        STATS.sequences += 1

    # --- set-up and tear-down --------------------------------------------------------------

    @initialize(policy=st.sampled_from(sorted(world.POLICIES)), requester=requesters, plan=turns)
    def begin(self, policy: str, requester: str, plan: list[list[world.PlannedCall]]) -> None:
        """A deployment under one of the policies, and a first run (every history has one)."""
        world.LEDGER.clear()
        world.TOOL_HOOKS.clear()
        path = self.session.folder / f"policy-{policy}.toml"
        path.write_text(world.POLICIES[policy])
        env = {
            "POLICY_FILE": str(path),
            "APPROVAL_TTL_SECONDS": str(world.TTL_SECONDS),
            "AGENTS": "tests.promise.world:REGISTRY",
        }
        prefix = f"model:{uuid.uuid4().hex[:10]}:"
        self.rig = Rig(self.session.redis, prefix, env)
        plans = self.rig.model_plans
        self.reference = Reference(policy=policy, logical=plans.logical, sent=plans.sent)
        self._run(self.rig.start())
        self.start_run(requester, plan)

    def teardown(self) -> None:
        if self.rig is None:
            return
        rig = self.rig
        try:
            self._run(rig.stop())
        finally:
            client = redis.Redis.from_url(self.session.redis.url)
            with contextlib.suppress(redis.RedisError):
                keys = list(client.scan_iter(match=f"{rig.prefix}*", count=1000))
                if keys:
                    client.delete(*keys)
            client.close()

    def _run(self, work: Any, timeout: float = 90) -> Any:
        return self.session.background.run(work, timeout)

    @property
    def bot(self) -> Rig:
        assert self.rig is not None
        return self.rig

    # --- people -------------------------------------------------------------------------------

    @rule(requester=requesters, plan=turns)
    def start_run(self, requester: str, plan: list[list[world.PlannedCall]]) -> None:
        tag = f"m{next(self._tags)}"
        self.bot.model_plans.plans[tag] = plan
        status, body = self._run(
            self.bot.sender.command(
                f"ops: {tag} follow the plan", user=requester, channel=world.CHANNEL
            )
        )
        if status == 200 and str(body.get("text", "")).startswith("Starting"):
            self.reference.runs[tag] = Run(tag, requester)
            self.runs[tag] = SeenRun(tag)
        self.after_step()

    @precondition(lambda self: bool(self.cards))
    @rule(pick=st.integers(0, 10_000), person=people, action=st.sampled_from(ACTIONS))
    def click(self, pick: int, person: str, action: str) -> None:
        card = self.cards[pick % len(self.cards)]
        self._run(self._click(card, person, action, pick))
        self.after_step()

    async def _click(self, card: SeenCard, person: str, action: str, pick: int) -> None:
        """Press `action` on `card` as `person`, telling the reference first (a click that the
        runtime refuses still counts there only if the reference's own policy allows it)."""
        if action.startswith("grant:"):
            await self._grant(card, person, action)
        elif action in ("typed", "typed-wrong"):
            await self._typed(card, person, right=action == "typed")
        elif action == "edit":
            await self._edit(card, person, pick)
        elif action in ("reject", "answer", "note"):
            # One text in a modal: a reason, an answer in the tool's place, a note.
            self.reference.clicks.append(Click(person, card.approval_id, TEXTS[action], _now()))
            text = {"reason": {"reason_input": _text("not now")}}
            action_id = "approve_note" if action == "note" else action
            await self._in_modal(card, action_id, person, text)
        else:
            kind: ClickKind = "always" if action == "always" else "approve"
            self.reference.clicks.append(Click(person, card.approval_id, kind, _now()))
            action_id = "approve_always" if action == "always" else "approve"
            await self.bot.sender.click(card.message, action_id, user=person, value=card.ref)

    async def _grant(self, card: SeenCard, person: str, action: str) -> None:
        _, scope, seconds = action.split(":")
        value = card.grants.get(f"{scope}:{seconds}")
        if value is None:
            return  # the card offers no such grant; nothing to press
        grant = (scope, int(seconds))
        self.reference.clicks.append(Click(person, card.approval_id, "grant", _now(), grant=grant))
        await self._choose_grant(card, value, person)

    async def _typed(self, card: SeenCard, person: str, *, right: bool) -> None:
        shown = self.reference.cards.get(card.approval_id)
        confirm_field = _confirm_field(self.reference.policy, shown)
        typed = "nope"
        if right and shown is not None and confirm_field is not None:
            typed = str(shown.arguments.get(confirm_field))
        at = _now()
        values = {"confirm": {"confirm_input": _text(typed)}}
        if await self._in_modal(card, "approve_typed", person, values):
            self.reference.clicks.append(Click(person, card.approval_id, "typed", at, value=typed))

    async def _edit(self, card: SeenCard, person: str, pick: int) -> None:
        shown = self.reference.cards.get(card.approval_id)
        options = world.EDITS.get(shown.tool if shown else "", ())
        if card.edit is None or not options:
            return
        edited = options[pick // len(self.cards) % len(options)]
        at = _now()
        values = {"arguments": {"arguments_input": _text(json.dumps(edited))}}
        if await self._in_modal(card, "edit_arguments", person, values, value=card.edit):
            edit = Click(person, card.approval_id, "edit", at, arguments=dict(edited))
            self.reference.clicks.append(edit)

    async def _choose_grant(self, card: SeenCard, value: str, person: str) -> None:
        """Pick a grant from the card's "Approve and allow…" menu, as Slack sends it (from a
        stale card too: the menu stays on a screen that was not refreshed)."""
        sender = self.bot.sender
        payload = sender.click_payload(card.message, "approve", user=person, value=card.ref)
        payload["actions"] = [
            {
                "type": "static_select",
                "action_id": "approve_with_grant",
                "block_id": "grant_menu",
                "selected_option": {"text": {"type": "plain_text", "text": "x"}, "value": value},
                "action_ts": f"{time.time():.6f}",
            }
        ]
        await sender.interact(payload)

    async def _in_modal(
        self,
        card: SeenCard,
        action_id: str,
        person: str,
        values: dict[str, Any],
        value: str | None = None,
    ) -> bool:
        """Press a button that opens a modal, fill it in and submit it; False when no modal
        opened (the person was refused) or the modal said the input was wrong."""
        slack = self.bot.slack
        opened = len(slack.views)
        status, _ = await self.bot.sender.click(
            card.message, action_id, user=person, value=value or card.ref
        )
        if status != 200:
            return False
        with contextlib.suppress(AssertionError):
            await slack.wait_for(lambda: len(slack.views) > opened, timeout=1.0, what="modal")
        if len(slack.views) <= opened:
            return False
        status, body = await self.bot.sender.submit_view(
            slack.views[-1], user=person, values=values
        )
        answer = json.loads(body) if body.startswith("{") else {}
        return status == 200 and answer.get("response_action") != "errors"

    @precondition(lambda self: bool(self.cards))
    @rule(pick=st.integers(0, 10_000), person=people, action=st.sampled_from(ACTIONS))
    def click_again(self, pick: int, person: str, action: str) -> None:
        """Clicks are most of what happens: a second rule for them doubles their share."""
        self.click(pick, person, action)

    @precondition(lambda self: any(r.stop_value for r in self.runs.values()))
    @rule(pick=st.integers(0, 10_000), person=people)
    def stop(self, pick: int, person: str) -> None:
        live = [r for r in self.runs.values() if r.stop_value and r.root is not None]
        if live:
            run = live[pick % len(live)]
            assert run.root is not None and run.stop_value is not None
            status = self._status_message(run.root)
            if status is not None:
                self._run(
                    self.bot.sender.click(status, "stop_run", user=person, value=run.stop_value)
                )
        self.after_step()

    @precondition(lambda self: bool(self.lines))
    @rule(pick=st.integers(0, 10_000), person=people)
    def revoke(self, pick: int, person: str) -> None:
        line, value = self.lines[pick % len(self.lines)]
        self._run(self.bot.sender.click(line, "revoke_grant", user=person, value=value))
        self.after_step()

    # --- the world ------------------------------------------------------------------------------

    @rule(
        kind=st.sampled_from(WORLD_EVENTS),
        seconds=st.sampled_from(TIME_STEPS),
        times=st.integers(1, 4),
        after=st.integers(0, 2),
    )
    def world_event(self, kind: str, seconds: int, times: int, after: int) -> None:
        """Time passes on Redis's clock (when the rig can move it), or something goes wrong:
        the model answers 500 to `times` requests once `after` more were answered; the worker
        is killed inside the next tool that starts (after the tool's own log) or while its next
        model request is out (the job is then redelivered to its replacement); Redis restarts."""
        rig = self.bot
        if kind == "time passes":
            if self.session.redis.moves:
                self.session.redis.advance(seconds)
                STATS.faults["time passed"] += 1
        elif kind == "model 5xx":
            rig.model_plans.failures += times
            rig.model_plans.failures_after = after
            STATS.faults[kind] += times
        elif kind == "worker killed in a tool":

            async def in_tool(_call_id: str) -> None:
                world.TOOL_HOOKS.remove(in_tool)
                STATS.faults[kind] += 1
                rig.kill_soon()
                await asyncio.sleep(3600)  # cancelled by the kill

            world.TOOL_HOOKS.append(in_tool)
        elif kind == "worker killed in a model request":

            async def in_request() -> None:
                STATS.faults[kind] += 1
                rig.kill_soon()
                await asyncio.sleep(0.5)

            rig.model_plans.hooks.append(in_request)
        else:
            self._run(rig.restart_redis())
            STATS.faults[kind] += 1
        self.after_step()

    # --- after each step -----------------------------------------------------------------------

    def after_step(self) -> None:
        STATS.steps += 1
        settled = self._run(self.bot.settle())
        if not settled:
            STATS.stuck += 1
        trail = self._run(self._trail())
        self._see(trail)
        facts = self._facts(trail, settled)
        if TRACE:
            frame = sys._getframe(1)
            step = {k: v for k, v in frame.f_locals.items() if k not in ("self", "rig")}
            print(f"{frame.f_code.co_name} {step}", flush=True)
            self._trace(trail)
        self.check(self.reference.violations(list(world.LEDGER), trail, facts))

    def _trace(self, trail: list[dict[str, Any]]) -> None:
        ran = [(e.tool, e.arguments, e.call_id) for e in world.LEDGER]
        events = Counter(e["event"] for e in trail)
        print(f"  ledger {ran}\n  trail {dict(events)}\n  cards {len(self.cards)}", flush=True)

    def check(self, violations: list[Violation]) -> None:
        new = []
        if violations and not self._broken:
            self._broken = True
            STATS.broken += 1
        for violation in violations:
            key = (violation.kind, violation.detail)
            if key in self.reported:
                continue
            self.reported.add(key)
            item = known(violation.kind)
            if item is not None and self.expected is not None and self.expected in item:
                raise PromiseBroken(f"{item}:\n{violation}")
            if (item is not None and self.expected is None) or SURVEY:
                STATS.examples.setdefault(violation.kind, str(violation))
                if not any(k == violation.kind for k, _ in self.reported - {key}):
                    STATS.known[violation.kind] += 1
                continue
            new.append(violation)
        if new:
            STATS.found += [str(v) for v in new]
            raise AssertionError("the promise broke:\n" + "\n".join(str(v) for v in new))

    async def _trail(self) -> list[dict[str, Any]]:
        trail = []
        for entry in await self.bot.audit_entries():
            details = json.loads(entry[b"details"])
            trail.append({**details, "event": entry[b"event"].decode(), "run_id": _run_id(entry)})
        return trail

    def _see(self, trail: list[dict[str, Any]]) -> None:
        """Learn the new cards, roots, Stop buttons and grant lines, and what the trail says of
        stops, grants and revocations (ids only: who may decide is the reference's business)."""
        self._see_cards({e["approval_id"]: e for e in trail if e["event"] == "requested"})
        self._see_runs()
        self._see_grant_lines()
        self._see_trail(trail)

    def _see_cards(self, requested: dict[str, dict[str, Any]]) -> None:
        known = {c.message.ts for c in self.cards}
        for message in self.bot.slack.cards():
            if message.ts in known or message.thread_ts is None:
                continue  # seen, or a copy outside the thread
            values = {a["action_id"]: str(a.get("value", "")) for a in message.actions()}
            buttons = ("approve", "approve_typed", "reject")
            ref = next((values[k] for k in buttons if k in values), "")
            parts = ref.split(":")
            entry = requested.get(parts[1]) if len(parts) > 1 else None
            sent = self.bot.model_plans.sent.get(entry["call_id"]) if entry else None
            logical = self.bot.model_plans.logical.get(entry["call_id"]) if entry else None
            if entry is None or sent is None or logical is None:
                continue
            self.reference.cards[parts[1]] = Card(
                approval_id=parts[1],
                call_id=entry["call_id"],
                run=logical.run,
                tool=sent.tool,
                arguments=dict(sent.arguments),
                opened_at=_now(),
                lost=LOST in message.all_text(),
            )
            grants, edit = _grant_values(message), _edit_value(message)
            self.cards.append(SeenCard(message, parts[1], ref, values, grants, edit))

    def _see_runs(self) -> None:
        for run in self.runs.values():
            if run.root is None:
                roots = self.bot.slack.roots()
                run.root = next((m for m in roots if f"{run.tag} follow" in m.text), None)
            status = self._status_message(run.root) if run.root is not None else None
            if status is not None and run.stop_value is None:
                stop = [a for a in status.actions() if a["action_id"] == "stop_run"]
                run.stop_value = str(stop[0].get("value"))

    def _see_grant_lines(self) -> None:
        seen = {m.ts for m, _ in self.lines}
        for message in list(self.bot.slack.messages.values()):
            if message.ts in seen or "'s grant" not in message.text:
                continue
            revoke = [a for a in message.actions() if a["action_id"] == "revoke_grant"]
            if revoke:
                self.lines.append((message, str(revoke[0].get("value"))))

    def _see_trail(self, trail: list[dict[str, Any]]) -> None:
        offset = world.CLOCK.offset  # the trail's `at` is the web's clock; the world's is ahead
        for entry in trail:
            event = entry["event"]
            if event == "granted":
                self.reference.grants[entry["grant_id"]] = entry["approval_id"]
            elif event == "revoked" and entry.get("grant_id") not in self.reference.revoked:
                self.reference.revoked[entry["grant_id"]] = float(entry["at"]) + offset
            elif event == "stopped":
                run = self.reference.runs.get(self._tag_of(entry["run_id"], trail) or "")
                if run is not None and run.stopped_at is None:
                    run.stopped_at = float(entry["at"]) + offset

    def _tag_of(self, run_id: str, trail: list[dict[str, Any]]) -> str | None:
        for entry in trail:
            if entry["run_id"] == run_id and "call_id" in entry:
                logical = self.bot.model_plans.logical.get(entry["call_id"])
                if logical is not None:
                    return logical.run
        return None

    def _status_message(self, root: Message) -> Message | None:
        thread = self.bot.slack.thread(root.channel, root.ts)
        return next((m for m in thread if "stop_run" in m.action_ids()), None)

    def _facts(self, trail: list[dict[str, Any]], settled: bool) -> ThreadFacts:
        decided = {
            card.approval_id: card.ref.split(":")[0]
            for card in self.cards
            if not {"approve", "approve_typed", "reject"} & set(card.message.action_ids())
        }
        answered = set()
        for tag, run in self.runs.items():
            if run.root is None:
                continue
            thread = self.bot.slack.thread(run.root.channel, run.root.ts)
            open_card = any({"approve", "approve_typed"} & set(m.action_ids()) for m in thread)
            ended = bool(self.bot.slack.final_answers(run.root.ts)) or any(
                m.text.startswith((":x:", ":no_entry: Stopped", ":no_entry_sign:")) for m in thread
            )
            if open_card or ended:
                answered.add(tag)
        return ThreadFacts(decided_cards=decided, settled_runs=frozenset(answered), settled=settled)


def _now() -> float:
    return world.CLOCK.now()


def _text(value: str) -> dict[str, str]:
    return {"type": "plain_text_input", "value": value}


def _run_id(entry: dict[bytes, bytes]) -> str:
    raw = entry.get(b"run_id")
    return raw.decode() if raw else ""


def _grant_values(message: Message) -> dict[str, str]:
    menus = [b["accessory"] for b in message.blocks if b.get("block_id") == "grant_menu"]
    found: dict[str, str] = {}
    for option in menus[0]["options"] if menus else []:
        text, value = option["text"]["text"], option["value"]
        if "exact arguments" in text:
            found["arguments:86400"] = value
        elif "for 1 hour" in text:
            found["tool:3600"] = value
        elif "for 8 hours" in text:
            found["tool:28800"] = value
    return found


def _edit_value(message: Message) -> str | None:
    for block in message.blocks:
        if block.get("block_id") == "call_arguments":
            accessory = block.get("accessory") or {}
            if accessory.get("action_id") == "edit_arguments":
                return str(accessory.get("value"))
    return None


def _confirm_field(policy: str, card: Card | None) -> str | None:
    if card is None:
        return None
    shown = received(card.tool, card.arguments) or card.arguments
    return rule_for(policy, card.tool, shown).confirm
