"""The tool calls of one stretch of a run, as a reporter may show each (`runtime.reporter.Task`):
asked for by the model, running, done, or waiting for a person. Kept in the worker's memory
for the stretch only: a stretch that a worker takes over starts its list anew, and nothing is
written to Redis for it (the journal and the audit trail keep what happened)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runtime.record.envelope import PendingCall
from runtime.reporter import Task

FUNCTION_CALLS = frozenset({"function_call", "custom_tool_call", "shell_call", "local_shell_call"})


class StretchTasks:
    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    def shown(self) -> tuple[Task, ...]:
        return tuple(self._tasks.values())

    def asked(self, output: Sequence[Any]) -> bool:
        """The model's response asked for these calls: each is `pending` (once)."""
        changed = False
        for item in output:
            call_id = getattr(item, "call_id", None)
            name = getattr(item, "name", None) or getattr(item, "type", "")
            kind = getattr(item, "type", None)
            if kind in FUNCTION_CALLS and call_id and call_id not in self._tasks:
                self._tasks[call_id] = Task(id=call_id, tool=str(name), state="pending")
                changed = True
        return changed

    def running(self, call_id: str | None, tool: str) -> None:
        self._set(call_id, tool, "running")

    def done(self, call_id: str | None, tool: str) -> None:
        self._set(call_id, tool, "done")

    def decided(self, calls: Iterable[PendingCall]) -> None:
        """Calls just decided by people (or the policy), with how: a resumed stretch's first
        tasks; an approved one runs next (`running`, then `done`), keeping who approved it."""
        for call in calls:
            decision = call.decision
            if decision is None:
                continue
            who = decision.user_id or ""
            if decision.by_policy:
                note = "policy"
            elif decision.outcome in ("approved", "approved_always"):
                note = f"approved:{who}"
            elif decision.outcome == "expired":
                note = "expired"
            else:
                note = f"{decision.outcome}:{who}"
            state = "done" if decision.outcome in ("approved", "approved_always") else "error"
            self._tasks[call.call_id] = Task(
                id=call.call_id,
                tool=call.tool,
                state=state,
                note=note,
                card=call.message_ts,
                card_channel=call.channel,
                reason=(decision.reason or "") if state == "error" else "",
            )

    def waiting(self, calls: Iterable[PendingCall]) -> None:
        for call in calls:
            self._tasks[call.call_id] = Task(
                id=call.call_id,
                tool=call.tool,
                state="waiting",
                deciders=call.approvers,
                card=call.message_ts,
                card_channel=call.channel,
            )

    def carded(self, cards: Mapping[str, str]) -> None:
        """The cards of waiting calls were posted (call id -> the card's id): each task links
        to its own."""
        for call_id, card in cards.items():
            task = self._tasks.get(call_id)
            if task is not None and task.state == "waiting":
                self._tasks[call_id] = replace(task, card=card)

    def ended(self, state: str) -> None:
        """The stretch failed or was stopped: what was still running or asked for did not end
        as asked."""
        for call_id, task in list(self._tasks.items()):
            if task.state in ("pending", "running"):
                self._tasks[call_id] = replace(task, state="error", note=state)

    def _set(self, call_id: str | None, tool: str, state: str) -> None:
        key = call_id or next(
            (k for k, t in self._tasks.items() if t.tool == tool and t.state != "done"),
            f"{tool}#{len(self._tasks)}",
        )
        known = self._tasks.get(key)
        if known is None:
            self._tasks[key] = Task(id=key, tool=tool, state=state)
        else:  # how it was decided, and its card, stay
            self._tasks[key] = replace(known, tool=tool, state=state)
