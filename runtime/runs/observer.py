"""Watching a run through the SDK's lifecycle hooks: one status message for people, updated
at a rate Slack is happy with. (What tools did is recorded by `runtime.journal.invoker`.)

When the reporter shows the model's text as it comes (`Reporter.shows_text`), the observer's
`speak` runs beside the stretch: it sends the text at most once a `TEXT_INTERVAL_SECONDS`
(riding on the same updates as the steps), and the stretch's last update carries the rest."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agents import Agent, ModelResponse, RunContextWrapper, RunHooks, Tool

from runtime.record.envelope import PendingCall
from runtime.record.leases import Lease
from runtime.record.store import RunStore
from runtime.reporter import Activity, Reporter, RunView, batchable
from runtime.runs.model_text import ModelText
from runtime.runs.posted_messages import ShownStatus, record_or_retract
from runtime.runs.stretch_tasks import StretchTasks

log = logging.getLogger(__name__)

# chat.update is a Tier 3 method (~50 per minute per workspace); one run stays well below.
MIN_UPDATE_INTERVAL_SECONDS = 1.5
TEXT_INTERVAL_SECONDS = 1.0
"""The model's text is sent at most this often per run (Slack's appends: about one a second)."""
MAX_STEPS_KEPT = 200
"""Steps kept with the run: the status shows the last dozen lines of them, a repeat folded into
its line ("called `list_users`", 30 times), so it keeps more than a dozen to count repeats right."""


class RunObserver(RunHooks[Any]):
    def __init__(
        self,
        *,
        run: RunView,
        reporter: Reporter,
        store: RunStore,
        lease: Lease,
        message_id: str | None,
        steps: tuple[str, ...] = (),
        clock: Any = time.monotonic,
    ) -> None:
        self._run = run
        self._reporter = reporter
        self._store = store
        self._lease = lease
        self._clock = clock
        self.message_id = message_id
        self._steps = list(steps)
        # Counting from now, a step that ends within the interval sends only its final status:
        # most resumes take milliseconds, and Slack need not see "working" just before "done".
        self._last_sent = clock()
        self._dirty = False
        self._posted = ""
        """A status message this delivery posted and has not recorded yet."""
        self._opened = False
        self.tasks = StretchTasks()
        """The stretch's tool calls, shown with its steps (never a flush of their own: they
        ride on the steps' updates, so the status message is updated as often as before)."""
        self.text: ModelText | None = None
        """The model's text of the stretch, when the reporter shows it (`watch_text`)."""
        self._lock = asyncio.Lock()
        """One update at a time, in order: `speak` sends beside the hooks."""
        self._spoke = asyncio.Event()
        self._speaking = False
        self._closed = False
        """The stretch's last update was sent (waiting, done, failed or stopped)."""
        self._last: Activity | None = None
        """The status as last shown."""

    @property
    def run(self) -> RunView:
        return self._run

    def watch_text(self) -> ModelText:
        """The stretch's text, to be fed by its model calls and sent by `speak`."""
        self.text = ModelText(on_change=self._text_changed)
        return self.text

    def _text_changed(self) -> None:
        self._dirty = True
        self._spoke.set()

    async def speak(self) -> None:
        """Send the model's new text, at most once a `TEXT_INTERVAL_SECONDS`, until `quiet`."""
        while not self._closed:
            await self._spoke.wait()
            self._spoke.clear()
            pause = TEXT_INTERVAL_SECONDS - (self._clock() - self._last_sent)
            if pause > 0:
                await asyncio.sleep(pause)
            self._speaking = True
            try:
                await self.flush("working", only_if_posted=True)
            finally:
                self._speaking = False

    async def quiet(self, speaking: asyncio.Task[None] | None) -> None:
        """The stretch ended: `speaking` (its `speak`) stops; an update it is sending is let
        finish (a stream it is starting must be known), a pause is cut short."""
        self._closed = True
        if speaking is None:
            return
        if not self._speaking:
            speaking.cancel()
        self._spoke.set()
        try:
            await asyncio.wait([speaking])
        except asyncio.CancelledError:
            speaking.cancel()
            raise
        if not speaking.cancelled() and (error := speaking.exception()) is not None:
            log.warning("run %s: the model's text not sent: %r", self._run.run_id, error)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        if self.tasks.asked(response.output):
            self._dirty = True

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        self.tasks.running(getattr(context, "tool_call_id", None), tool.name)
        await self._note(f"tool:{tool.name}")

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: Any
    ) -> None:
        self.tasks.done(getattr(context, "tool_call_id", None), tool.name)
        self._dirty = True

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        await self._note(f"handoff:{to_agent.name}")

    async def _note(self, step: str) -> None:
        self._steps.append(step)
        self._dirty = True
        if self._clock() - self._last_sent >= MIN_UPDATE_INTERVAL_SECONDS:
            await self.flush("working")

    async def approved_always(self, calls: Sequence[PendingCall]) -> None:
        """A step for each call an Approve always of the run approved (`always:<tool>:<user>`):
        the thread sees who stood in for it, as it sees a grant's use."""
        for call in calls:
            decision = call.decision
            if decision is None or decision.by_policy or decision.by_grant is not None:
                continue
            if decision.user_id is not None:
                await self._note(f"always:{call.tool}:{decision.user_id}")

    async def waiting(self, open_calls: Sequence[PendingCall], *, asked: int) -> ShownStatus:
        """The run now waits for `open_calls` (of `asked` calls that needed an approval): the
        status is shown, and returned to be recorded with the cards (`post_cards`), which are
        posted next (`Activity.cards_follow`: then `cards_posted`)."""
        tools = tuple(c.tool for c in open_calls)
        batch = batchable(open_calls)
        self.tasks.waiting(open_calls)
        await self.flush(
            "waiting",
            waiting_for=tools,
            approvals_asked=asked,
            batchable=batch,
            record=False,
            cards_follow=True,
        )
        return self.shown()

    async def cards_posted(self, cards: Mapping[str, str]) -> None:
        """The cards `waiting` announced are posted (call id -> the card's id): its status is
        shown once more, each waiting task with its card, for a reporter that left its message
        open for them (`Reporter.cards_posted`: a stream, stopped now with a link to each card:
        the card's id was not known when the status was first shown). Nothing is recorded: the
        id kept with the first card stays the run's, so this costs no write of its own."""
        async with self._lock:
            last = self._last
            if last is None or not last.cards_follow:
                return
            self.tasks.carded(cards)
            activity = replace(
                last, tasks=self.tasks.shown(), cards_follow=False, opens_stretch=False
            )
            self._last = activity
            self.message_id = await self._reporter.cards_posted(
                self._run, self.message_id or "", activity
            )

    def shown(self) -> ShownStatus:
        """The status message as last shown, with the steps kept for the run's next step."""
        return ShownStatus(
            message_id=self.message_id or "",
            steps=tuple(self._steps[-MAX_STEPS_KEPT:]),
            posted=self._posted,
        )

    async def flush(
        self,
        state: str,
        *,
        waiting_for: tuple[str, ...] = (),
        approvals_asked: int = 0,
        batchable: bool = False,
        ran: tuple[str, ...] = (),
        not_run: tuple[str, ...] = (),
        record: bool = True,
        only_if_posted: bool = False,
        cards_follow: bool = False,
    ) -> None:
        """Send the status now (always at the end of a step, whatever the rate); `record`:
        keep it with the run now (else the caller records `shown()` with its own write);
        `only_if_posted`: only when it is a message posted just now (the text's updates)."""
        async with self._lock:
            await self._flush(
                state,
                waiting_for=waiting_for,
                approvals_asked=approvals_asked,
                batchable=batchable,
                ran=ran,
                not_run=not_run,
                record=record,
                only_if_posted=only_if_posted,
                cards_follow=cards_follow,
            )

    async def _flush(
        self,
        state: str,
        *,
        waiting_for: tuple[str, ...],
        approvals_asked: int,
        batchable: bool,
        ran: tuple[str, ...],
        not_run: tuple[str, ...],
        record: bool,
        only_if_posted: bool,
        cards_follow: bool,
    ) -> None:
        if state == "working" and (not self._dirty or self._closed):
            return
        if state != "working":
            self._closed = True
        if state in ("failed", "stopped"):
            self.tasks.ended(state)
        self._dirty = False
        self._last_sent = self._clock()
        activity = Activity(
            steps=tuple(self._steps[-MAX_STEPS_KEPT:]),
            state=state,
            waiting_for=waiting_for,
            approvals_asked=approvals_asked,
            batchable=batchable,
            ran=ran,
            not_run=not_run,
            tasks=self.tasks.shown(),
            opens_stretch=not self._opened,
            text=self.text.shown if self.text is not None else "",
            cards_follow=cards_follow,
        )
        self._last = activity
        self._opened = True
        shown = self.message_id
        self.message_id = await self._reporter.progress(self._run, self.message_id, activity)
        if self.message_id != shown:
            self._posted = self.message_id
        if not record or (not self._posted and (state == "done" or only_if_posted)):
            # The answer's status: the run is finishing, and no later step reads the steps; a
            # message posted just now is recorded still, so that a retry does not post it again.
            return
        status = self.shown()
        self._posted = ""
        # Kept with the run, so the next step (after an approval) goes on with the same list.
        await record_or_retract(
            self._reporter,
            self._run,
            status.posted,
            self._store.set_status(self._lease, status.message_id, list(status.steps)),
        )


def not_run_notes(calls: list[PendingCall]) -> tuple[str, ...]:
    """Why each decided call did not run, for the status message (`rejected:<tool>`, ...)."""
    notes = []
    for call in calls:
        decision = call.decision
        if decision is None or decision.outcome not in ("rejected", "answered", "expired"):
            continue
        kind = "policy" if decision.by_policy else decision.outcome
        notes.append(f"{kind}:{call.tool}")
    return tuple(dict.fromkeys(notes))
