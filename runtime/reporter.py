"""How the runtime tells people what is happening, without knowing where they are.

`bot.reporting.reporter.SlackReporter` implements this with the Slack Web API; the worker's entry
point wires the two together.

`Reach` is how it reaches people outside a run's thread: copies of a card in direct messages
and other channels, and the word that a call was escalated. `bot.reporting.copies.SlackReach`
implements it; a worker without one sends no copies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from runtime.jobs.contracts import Conversation
from runtime.record.envelope import CardCopy, PendingCall, RunEnvelope


class Failure(StrEnum):
    """Why a run ended without an answer; the reporter turns each into words."""

    MODEL_ERROR = "model_error"
    MAX_TURNS = "max_turns"
    AGENT_ERROR = "agent_error"
    UNKNOWN_AGENT = "unknown_agent"
    TOOL_REMOVED = "tool_removed"
    UNREADABLE_STATE = "unreadable_state"
    UNSUPPORTED_ENVELOPE = "unsupported_envelope"
    GAVE_UP = "gave_up"
    MCP_UNAVAILABLE = "mcp_unavailable"
    """An MCP server the run needs stayed unreachable; `detail` is its name."""
    OUTCOME_LOST = "outcome_lost"
    """A call the policy let run may have run, its result lost; `detail` is its tool."""
    OUTPUT_HELD = "output_held"
    """A call whose output is held for a person ran where the run could not stop for them (the
    policy let it run without a card); `detail` is its tool. Nothing was released."""
    ARGUMENTS_REFUSED = "arguments_refused"
    """The model asked for a call whose arguments pass `runtime.calls.digest`'s bounds; `detail`
    is the tool and the bound."""


class ConversationUnavailable(Exception):
    """The reporter cannot talk in the run's conversation at all; the run cannot start."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunView:
    """What a reporter may show about a run."""

    run_id: str
    agent: str
    task: str
    conversation: Conversation

    @classmethod
    def of(cls, envelope: RunEnvelope) -> RunView:
        return cls(
            run_id=envelope.run_id,
            agent=envelope.root_agent,
            task=envelope.task,
            conversation=envelope.conversation,
        )

    def card_channel(self, call: PendingCall) -> str:
        """Where `call`'s card is: the approvers' channel for a run started in a direct
        message (`PendingCall.channel`), else the run's own."""
        return call.channel or self.conversation.channel


def batchable(calls: Iterable[PendingCall]) -> bool:
    """Whether these open calls may be decided all at once (`Activity.batchable`)."""
    listed = list(calls)
    return len(listed) >= 2 and all(c.quorum <= 1 and c.confirm is None for c in listed)


@dataclass(frozen=True, kw_only=True, slots=True)
class Task:
    """One tool call of the run's current stretch, for a reporter that shows each (a streamed
    message's tasks). Machine-neutral: the reporter words it."""

    id: str
    """The model's call id."""
    tool: str
    state: str
    """`pending` (the model asked for it), `running`, `done`, `error`, or `waiting` (for a
    person)."""
    note: str = ""
    """How it was decided or ended: `approved:<user>`, `rejected:<user>`, `expired`, `policy`
    (rejected by the policy), `stopped:<user>`, `failed`."""
    deciders: tuple[str, ...] = ()
    """`waiting`: who may decide it (users and groups; none: anyone in the channel)."""
    card: str | None = None
    """The id of the message that asked people to decide it (its card), once posted."""
    card_channel: str | None = None
    """Where that card is, when not in the run's thread (`PendingCall.channel`)."""
    reason: str = ""
    """Why the person who decided it said no (a rejection's reason), as they wrote it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Activity:
    """The run's progress so far, for its status message."""

    steps: tuple[str, ...]
    """Short machine-neutral notes, e.g. `tool:list_users`, `handoff:billing`."""
    state: str
    """`working`, `waiting` (for approvals), `done`, `failed` or `stopped`."""
    waiting_for: tuple[str, ...] = ()
    """`waiting`: the tools whose approvals are still open."""
    approvals_asked: int = 0
    """`waiting`: how many calls of this round needed an approval (open or already decided,
    e.g. by the policy)."""
    batchable: bool = False
    """`waiting`: two or more calls are open and none needs a quorum or a typed confirmation,
    so the status message offers **Approve all** and **Reject all**."""
    ran: tuple[str, ...] = ()
    """`done`: the tools that ran during the run (from its tool journal)."""
    not_run: tuple[str, ...] = ()
    """`done`: calls that did not run and why: `rejected:<tool>`, `expired:<tool>`, or
    `policy:<tool>` (rejected by the policy)."""
    tasks: tuple[Task, ...] = ()
    """The tool calls of the current stretch (a resumed one starts with the calls just
    decided), in the order they came."""
    opens_stretch: bool = False
    """The first showing of a stretch (the run's start, or its resume) by the worker running
    it: a reporter may begin a new message for it. False for a redraw by anyone else."""
    text: str = ""
    """The model's text of the stretch so far, as it was produced, when the reporter shows it
    (`Reporter.shows_text`): each showing holds all of it, a reporter sends what is new. A
    failed attempt's text is withdrawn: the text may then not begin with what was shown."""
    cards_follow: bool = False
    """`waiting`, shown by the worker as the run stops: the open calls' cards are posted next,
    and this status is shown once more when they are (`Reporter.cards_posted`), each waiting
    task with its `card`. A reporter may leave its message open till then (a stream, stopped
    with a link to each card). False for a redraw by anyone else."""


class Reporter(Protocol):
    async def run_started(self, run: RunView) -> str:
        """Announce the run; return the id of its thread.

        Raises ConversationUnavailable when the conversation refuses messages (after telling
        the requester some other way if it can).
        """
        ...

    async def working(self, run: RunView) -> None:
        """A stretch of the run begins (its start, or its resume once its calls are decided),
        before any step of it: people may see at once that it works. Best effort; never
        raises."""
        ...

    async def progress(self, run: RunView, message_id: str | None, activity: Activity) -> str:
        """Create (no id yet) or update the run's status message; return its id."""
        ...

    async def cards_posted(self, run: RunView, message_id: str, activity: Activity) -> str:
        """The cards of a status shown with `Activity.cards_follow` are posted: `activity` is
        that status again, each waiting task with its `card`. A message left open for them is
        closed now (nothing is sent otherwise); returns the status message's id as it is now.
        Nothing records that id: the one recorded with the first card stays the one to go on
        from (the reporter's next showing tells the two apart)."""
        ...

    def shows_text(self, run: RunView) -> bool:
        """Whether the model's text is worth producing as it comes for this run's stretch now
        (`Activity.text`): its model calls are then asked as streams. Answered at the start
        of each stretch."""
        ...

    async def approval_requested(self, run: RunView, call: PendingCall) -> str:
        """Ask people to decide one call; return the id of the message that asks."""
        ...

    async def retract(self, run: RunView, message_id: str) -> None:
        """Take back a message this delivery posted but could not record as the run's: a later
        delivery of the run's job took over meanwhile and posts its own. Best effort; never
        raises."""
        ...

    async def approval_expired(self, run: RunView, call: PendingCall) -> str | None:
        """Show that nobody decided `call` in time. Returns the id of a new message when the one
        that asked was gone and the card was posted again, else None."""
        ...

    async def approval_reminder(self, run: RunView, call: PendingCall) -> None:
        """Remind the people who may decide `call` that it is still waiting."""
        ...

    async def call_refused(self, run: RunView, call: PendingCall) -> None:
        """Say that an approved call was not run because it changed after the approval."""
        ...

    async def edit_previewed(self, run: RunView, call: PendingCall) -> None:
        """Show `call.edited_preview`, the preview of the edited arguments the tool is about to
        run with, on its card (and copies) and in the thread. Best effort; never raises."""
        ...

    async def run_finished(self, run: RunView, output: str) -> None: ...

    async def run_stopped(self, run: RunView, user_id: str) -> None:
        """Say in the run's conversation that `user_id` stopped it."""
        ...

    async def run_failed(
        self, run: RunView, failure: Failure, detail: str, ran: Sequence[str] = ()
    ) -> None:
        """`detail` is safe to show: never raw exception text from a model or tool. `ran`
        names the tools that had already run, so people know what did happen."""
        ...


class Reach(Protocol):
    async def copy_card(
        self, run: RunView, call: PendingCall, targets: tuple[str, ...]
    ) -> tuple[CardCopy, ...]:
        """Post a copy of `call`'s card to each target: a person (a direct message), each member
        of a user group, or a channel. Returns the copies posted; a target that cannot be
        reached is skipped (and logged)."""
        ...

    async def redraw_copies(self, run: RunView, call: PendingCall) -> None:
        """Show `call` as it stands (decided, or the approvals so far) on each of its copies."""
        ...

    async def escalated(self, run: RunView, call: PendingCall, targets: tuple[str, ...]) -> None:
        """Say in the run's thread that `call` was escalated to `targets`, mentioning them, and
        redraw its card and copies so they name everyone who may decide it now."""
        ...
