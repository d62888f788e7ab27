"""The words by which Countersign reaches people beyond a card: `/agent status`, the Home tab,
copies of cards, escalations, reminders. Part of `bot.words.runs` (whose helpers it uses), kept
apart only for size."""

from __future__ import annotations

from collections.abc import Sequence

from bot.words.deciders import mention
from bot.words.runs import OUTCOME_WORDS, PRODUCT, escape, slack_date, user
from runtime.record import Decision
from runtime.runs import LiveRun

# --- /agent status ------------------------------------------------------------------------------

TASK_SHOWN = 80
"""Characters of a task shown in a list of runs."""


def shortened(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def run_state(run: LiveRun) -> str:
    """`working`, or `waiting for 2 approvals`: approvals, not calls (a call under a quorum of
    two waits for two)."""
    if run.state == "waiting":
        needed = run.approvals_needed or run.pending
        return f"waiting for {needed} approval{'' if needed == 1 else 's'}"
    return {"finishing": "answering"}.get(run.state, run.state)


def age(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} d {hours % 24} h"


def run_line(run: LiveRun, link: str | None) -> str:
    """One live run: agent, requester, task, state, age, thread and id."""
    where = f"<{link}|thread>" if link else f"<#{run.channel}>"
    always = "".join(
        f" · Approve always: `{escape(tool)}` by {user(who)}" for tool, who in run.always
    )
    return (
        f"• *{escape(run.agent)}* for {user(run.requester)}: "
        f"{escape(shortened(run.task, TASK_SHOWN))} · {run_state(run)} · "
        f"{age(run.age_seconds)} · {where} · `{run.run_id}`{always}"
    )


def status_listing(lines: Sequence[str], total: int) -> str:
    if not lines:
        return "No runs are live in this channel. `/agent <task>` starts one."
    more = f"\n…and {total - len(lines)} more." if total > len(lines) else ""
    return f"*Live runs in this channel* ({total})\n" + "\n".join(lines) + more


def status_no_run(run_id: str) -> str:
    return (
        f"No live run `{escape(run_id)}` here: it has ended, or it runs in another channel. "
        "`/agent audit <run id>` shows what happened to it."
    )


STATUS_UNAVAILABLE = (
    f"{PRODUCT} can't reach its database right now, so it can't list the runs. "
    "Please try again in a minute."
)


# --- reminders, copies of cards and escalations ----------------------------------------------


def reminder_anyone(agent: str, tool: str, expires_at: float) -> str:
    """A reminder when anyone in the channel may decide: it mentions nobody."""
    return (
        f":alarm_clock: Reminder: *{escape(agent)}* still waits for a decision on "
        f"`{escape(tool)}` (above); anyone here but the requester may decide. It expires "
        f"{slack_date(expires_at)}."
    )


def copy_note(channel: str, link: str | None) -> str:
    """Under a copy of a card: where the request lives, and that all copies are one."""
    where = f"<#{channel}> (<{link}|thread>)" if link else f"<#{channel}>"
    return f"A copy of a request in {where}: a decision here counts there too, and the first wins."


def copy_settled_note(channel: str, link: str | None, decision: Decision, requester: str) -> str:
    """Under a copy once its call is settled: where it lives and how it ended, no longer an
    invitation to decide."""
    where = f"<#{channel}> (<{link}|thread>)" if link else f"<#{channel}>"
    return f"A copy of a request in {where}, {settled(decision, requester)}."


def settled(decision: Decision, requester: str) -> str:
    """ "approved by @bob and @carol", "withdrawn by @alice", "expired: nobody decided"."""
    if decision.outcome == "expired":
        return "expired: nobody decided in time"
    if decision.by_policy:
        return f"{OUTCOME_WORDS[decision.outcome]} by the policy"
    ids = [a.user_id for a in decision.approvals] or [decision.user_id or ""]
    people = [user(i) for i in ids if i]
    who = ", ".join(people[:-1]) + " and " + people[-1] if len(people) > 1 else "".join(people)
    if decision.outcome == "rejected" and decision.user_id == requester:
        return f"withdrawn by {who}"
    return f"{OUTCOME_WORDS[decision.outcome]} by {who or 'someone'}"


ESCALATED_PREFIX = ":rotating_light:"


def escalated(targets: Sequence[str], tool: str, expires_at: float) -> str:
    who = " ".join(mention(target) for target in targets)
    return (
        f"{ESCALATED_PREFIX} {who} Escalated: nobody has decided `{escape(tool)}` (above) yet, "
        f"so you may decide it too. It expires {slack_date(expires_at)}."
    )


# --- the Home tab ------------------------------------------------------------------------------

HOME_WAITING = "Waiting for you"
HOME_NOTHING_WAITING = (
    "Nothing waits for you. Tool calls you may decide, in any channel, appear here."
)
HOME_YOUR_RUNS = "Your runs"
HOME_NO_RUNS = "You have no live runs. `/agent <task>` in a channel starts one."
ARGUMENTS_SHOWN = 200
"""Characters of a call's arguments shown on the Home tab (the card has them all)."""


def home_shows_all(arguments: str) -> bool:
    """Whether `home_call` shows these arguments as they are (else the tab offers **View full
    arguments**: nobody decides on a part)."""
    return shortened(arguments, ARGUMENTS_SHOWN) == arguments


def home_call(agent: str, tool: str, arguments: str) -> str:
    code = escape(shortened(arguments, ARGUMENTS_SHOWN)).replace("`", "'")
    return f":raised_hand: *{escape(agent)}* wants to run `{escape(tool)}`\n`{code}`"


def home_call_context(
    requester: str, channel: str, link: str | None, expires_at: float, progress: str | None
) -> str:
    where = f"<#{channel}> (<{link}|thread>)" if link else f"<#{channel}>"
    line = f"Asked by {user(requester)} in {where} · expires {slack_date(expires_at)}"
    return f"{line} · {progress}" if progress else line


def home_more(count: int, *, about: bool = False) -> str:
    """`about`: counted from the index's sizes, which may still hold a few calls just closed."""
    return f"…and {'about ' if about else ''}{count} more: the oldest are not shown."


def home_run(run: LiveRun, link: str | None) -> str:
    where = f"<{link}|thread>" if link else f"<#{run.channel}>"
    return (
        f"*{escape(run.agent)}*: {escape(shortened(run.task, TASK_SHOWN))}\n"
        f"{run_state(run)} · {age(run.age_seconds)} · in <#{run.channel}> · "
        f"{where} · `{run.run_id}`"
    )
