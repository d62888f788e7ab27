"""Every word Countersign says to people in Slack, in one place."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from runtime.calls import shown_digest
from runtime.record import Decision
from runtime.reporter import Failure

PRODUCT = "Countersign"


def escape(text: str) -> str:
    """Escape text for Slack mrkdwn, so user or model text cannot ping or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


SLACK_DATE_STYLE = "{date_short_pretty} at {time}"
"""The one way a time is written in Slack: "Today at 12:36 PM", in the reader's own zone (the
date only when it is not today, yesterday or tomorrow)."""
SLACK_SECONDS_STYLE = "{date_short_pretty} at {time_secs}"
"""The same, to the second: for lists of events a few seconds apart (`/agent audit`)."""


def slack_date(epoch: float, *, seconds: bool = False) -> str:
    """A timestamp every reader sees in their own time zone, always in one style (where Slack
    cannot draw it, the fallback is ISO 8601 with its zone)."""
    timespec = "seconds" if seconds else "minutes"
    fallback = dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec=timespec)
    style = SLACK_SECONDS_STYLE if seconds else SLACK_DATE_STYLE
    return f"<!date^{int(epoch)}^{style}|{fallback}>"


def user(user_id: str) -> str:
    return f"<@{user_id}>"


def and_list(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


# --- /agent ----------------------------------------------------------------------------------


def mcp_tool_list(tools: Sequence[tuple[str, str]]) -> str:
    """`list_tables`, `drop_table` on `db`; `search` on `wiki`."""
    by_server: dict[str, list[str]] = {}
    for tool, server in tools:
        by_server.setdefault(server, []).append(f"`{escape(tool)}`")
    return "; ".join(f"{', '.join(names)} on `{escape(s)}`" for s, names in by_server.items())


def command_starting(agent: str) -> str:
    return f"Starting *{escape(agent)}* on your task… I'll post in a thread in this channel."


RUN_NOT_CONFIRMED = (
    f"Your run is queued, but {PRODUCT}'s database did not confirm it in time (its replicas "
    "are behind). It will most likely start in a moment; if nothing appears within a minute, "
    "please run the command again."
)
QUEUE_UNAVAILABLE = (
    f"{PRODUCT} can't reach its job queue right now, so nothing was started. "
    "Please try again in a minute."
)


TASK_SHOWN = 300
"""Characters of the task in the thread's first message; a long paste would bury the thread."""


def shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def root_message(requester: str, agent: str, task: str) -> str:
    return f"{user(requester)} asked *{escape(agent)}*: {escape(shortened(task, TASK_SHOWN))}"


def cannot_post(channel: str) -> str:
    return (
        f"{PRODUCT} can't post in <#{channel}>, so your task was not started. "
        "Invite the app to the channel (`/invite @Countersign`) and try again."
    )


# --- stopping a run ---------------------------------------------------------------------------

STOP = "Stop"


def run_stopped(user_id: str) -> str:
    return (
        f":no_entry: Stopped by {user(user_id)}. Nothing more runs, "
        "and the agent is not asked again."
    )


STOPPING = (
    "Stopping: a tool already running finishes, then nothing more runs. "
    "The thread says when it has stopped."
)
STOP_REQUESTED = "Stopped. The thread says so, and nothing more runs."
STOP_CLOSED = "This run has already ended, so there is nothing to stop."
STOP_UNKNOWN_RUN = (
    "There is no run with that id in this workspace. `/agent status` lists live runs."
)


def stop_already(user_id: str) -> str:
    return f"{user(user_id)} already stopped this run."


def stop_not_allowed(names: Sequence[str], channels: Sequence[str] = ()) -> str:
    """`channels`: where a call waits that anyone there may decide (so may stop the run)."""
    who = escape(names_list(names))
    if channels:
        anyone = "anyone in " + names_list([f"<#{c}>" for c in channels])
        who = f"{who}, or {anyone}," if who else anyone
    return (
        f"Only {who} may stop this run, so nothing changed. "
        "(The person who asked, anyone who may decide its calls, and the admins.)"
    )


# --- approval cards ---------------------------------------------------------------------------

APPROVE = "Approve"
APPROVE_ALWAYS = "Approve always"
REJECT = "Reject"
VIEW_ARGUMENTS = "View full arguments"


def approval_headline(agent: str, tool: str, mcp_server: str | None = None) -> str:
    headline = f":raised_hand: *{escape(agent)}* wants to run `{escape(tool)}`"
    if mcp_server is not None:
        headline += f" on MCP server `{escape(mcp_server)}`"
    return headline


RULE_CHARS = 200


def rule_line(when: str | None, name: str | None = None) -> str:
    """The policy rule that chose who decides: its name (`Rule: refunds over $1,000`), else its
    `when` (`Rule: args.amount_cents > …`)."""
    text = " ".join((name or when or "").split())
    if len(text) > RULE_CHARS:
        text = text[:RULE_CHARS] + "…"
    if name:
        return f"Rule: {escape(text)}"
    code = text.replace("`", "'")
    return f"Rule: `{escape(code)}`"


RUN_AGAIN = "Run again"


def outcome_lost_headline(tool: str) -> str:
    """A call that may have run (its worker died inside it): run it again or not."""
    return (
        f":warning: `{escape(tool)}` may have run; its result was lost. It runs again only "
        "if you say so: check whether it took effect first."
    )


def approval_fallback(agent: str, tool: str) -> str:
    return f"Approval needed: {agent} wants to run {tool}"


def arguments_shortened(shown: int, total: int) -> str:
    return f"Arguments shortened: {shown:,} of {total:,} characters shown."


APPROVE_ALWAYS_HINT = "_Approve always_ approves this tool for the rest of this run."


ANSWER_SHOWN = 2900
"""An answer's line on a decided card, at most (a section holds 3,000 characters)."""


def decision_headline(decision: Decision, tool: str, *, requester: str | None = None) -> str:
    """The first line of a decided card: what happened to the call. A rejection by the
    `requester` is a withdrawal of their own request, and says so."""
    name = f"`{escape(tool)}`"
    if decision.outcome in ("approved", "approved_always"):
        ids = [a.user_id for a in decision.approvals] or [decision.user_id or ""]
        mentions = [user(i) for i in ids if i]
        who = and_list(mentions) if len(mentions) > 1 else ""
        who = "The policy" if decision.by_policy else who or _who(decision)
        always = " for the rest of this run" if decision.outcome == "approved_always" else ""
        return f":white_check_mark: {who} approved {name}{always}"
    if decision.outcome == "rejected":
        reason = escape((decision.reason or "").strip())
        because = f": {reason}" if reason else ""
        if not decision.by_policy and requester and decision.user_id == requester:
            withdrawn = f"Withdrawn by {user(requester)}, who asked for {name}"
            return f":leftwards_arrow_with_hook: {withdrawn}{because}"
        who = "The policy" if decision.by_policy else _who(decision)
        return f":x: {who} rejected {name}{because}"
    if decision.outcome == "answered":  # **Answer instead**: the tool did not run
        answer = escape((decision.answer or "").strip())
        return f"💬 {_who(decision)} answered instead: {answer}"[:ANSWER_SHOWN]
    if decision.outcome == "stopped":
        return f":no_entry: Stopped by {_who(decision)}"
    return ":hourglass: Expired, did not run"


def _who(decision: Decision) -> str:
    return user(decision.user_id) if decision.user_id else "Someone"


def decision_context(
    agent: str, requester: str, decision: Decision, mcp_server: str | None = None
) -> str:
    """Under the headline: who asked, which agent (and MCP server), and when it was settled."""
    when = slack_date(decision.decided_at)
    if decision.outcome == "expired":
        settled = f"expired {when}: no decision came in time"
    elif decision.outcome == "stopped":
        settled = f"stopped {when}, so it did not run"
    else:
        settled = f"decided {when}"
    server = f" on MCP server `{escape(mcp_server)}`" if mcp_server else ""
    return f"Requested by {user(requester)} for *{escape(agent)}*{server} · {settled}"


OUTCOME_WORDS = {
    "approved": "approved",
    "approved_always": "approved (always)",
    "rejected": "rejected",
    "answered": "answered instead",
    "expired": "expired",
    "stopped": "stopped",
}


def already_decided(decision: Decision) -> str:
    if decision.outcome == "expired":
        return APPROVAL_EXPIRED
    who = user(decision.user_id) if decision.user_id else "someone"
    return f"This was already {OUTCOME_WORDS[decision.outcome]} by {who}; nothing changed."


def already_approved(count: int, quorum: int) -> str:
    return (
        f"You already approved this. It needs {quorum} different approvers; "
        f"{count} so far. Nothing changed."
    )


def names_list(names: Sequence[str]) -> str:
    """`a`, `a or b`, `a, b or c`."""
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]


def not_an_approver(names: Sequence[str], tool: str) -> str:
    return f"Only {escape(names_list(names))} may decide `{escape(tool)}`, so nothing was recorded."


SELF_APPROVAL_REFUSED = (
    "You asked for this, so someone else has to approve it; you may still reject it. "
    "Nothing was recorded."
)
APPROVE_ALWAYS_NOT_OFFERED = (
    "_Approve always_ is not offered for this call, so nothing was recorded. Use Approve."
)
OTHER_VERSION = (
    f"This request was made by a newer version of {PRODUCT}, which this one cannot read yet "
    "(a deploy is probably under way), so nothing was recorded. Please try again in a minute."
)
DIRECTORY_UNAVAILABLE = (
    "Slack did not tell Countersign who is in the approver group just now, so nothing was "
    "recorded. Please try again in a few seconds."
)


def digest_line(digest: str) -> str:
    return f"Call digest `{shown_digest(digest)}`"


def reminder(mentions: Sequence[str], agent: str, tool: str, expires_at: float) -> str:
    who = " ".join(mentions)
    return (
        f":alarm_clock: {who} Reminder: *{escape(agent)}* still waits for a decision on "
        f"`{escape(tool)}` (above). It expires {slack_date(expires_at)}."
    )


def reminder_settled(tool: str, decision: Decision) -> str:
    """A reminder redrawn once its call is settled: it no longer says the call waits."""
    if decision.outcome == "expired":
        settled = "expired: nobody decided in time"
    else:
        settled = f"was {OUTCOME_WORDS[decision.outcome]}"
    return f":alarm_clock: No longer waiting: `{escape(tool)}` {settled} (above)."


def call_refused(tool: str, digest: str) -> str:
    return (
        f":warning: `{escape(tool)}` was approved, but the call changed before it could run, "
        f"so it did not run (approved digest `{shown_digest(digest)}`)."
    )


APPROVAL_EXPIRED = "This approval expired: no decision came in time, so the tool did not run."
APPROVAL_CLOSED = "This run is no longer waiting for decisions; nothing was recorded."
CALL_CHANGED = (
    "This call changed since your screen showed it (someone edited its arguments), so nothing "
    "was recorded. Look again at the card: it shows the call as it stands now, with its digest."
)
APPROVAL_UNKNOWN = (
    "This approval is not open: its run has finished or is unknown here. Nothing was recorded."
)
BUTTON_INVALID = "That button's data isn't valid, so nothing was recorded."
TRY_AGAIN = (
    f"{PRODUCT} can't reach its database for a moment, so your decision was not recorded. "
    "The buttons still work: please try again in a few seconds."
)
NOT_CONFIRMED = (
    f"{PRODUCT}'s database did not confirm your decision in time (its replicas are behind), so "
    "it does not count yet. If the card does not show your decision within a few seconds, "
    "please click again: the buttons still work."
)
STOP_NOT_CONFIRMED = (
    f"{PRODUCT}'s database did not confirm the stop in time (its replicas are behind). "
    "Please stop the run again in a few seconds."
)

# --- reject modal ------------------------------------------------------------------------------

REJECT_TITLE = "Reject tool call"
REJECT_SUBMIT = "Reject"
REJECT_CANCEL = "Cancel"
REJECT_LABEL = "Why? The agent reads this."
REJECT_PLACEHOLDER = "e.g. Not during business hours; ask #ops first."
REJECT_REASON_REQUIRED = "Please say why, so the agent can explain it."


def reject_context(agent: str, tool: str, requester: str | None) -> str:
    """Named as the card names them: the person who asked (when known), and the agent."""
    asked = f"requested by {user(requester)} for" if requester else "requested for"
    return f"Rejecting `{escape(tool)}`, {asked} *{escape(agent)}*."


ARGUMENTS_TITLE = "Tool call arguments"
ARGUMENTS_CLOSE = "Close"

# --- endings -------------------------------------------------------------------------------------

FAILURES = {
    Failure.MODEL_ERROR: "The model could not be used ({detail}).",
    Failure.MAX_TURNS: "The agent took too many steps without finishing.",
    Failure.AGENT_ERROR: "The agent stopped with an error ({detail}).",
    Failure.UNKNOWN_AGENT: "This run's agent is not available any more ({detail}).",
    Failure.TOOL_REMOVED: "This run waits on a tool its agent no longer offers ({detail}); "
    "nothing was run.",
    Failure.UNREADABLE_STATE: "This run's saved state can't be resumed by this version ({detail}).",
    Failure.UNSUPPORTED_ENVELOPE: "This run was saved by a different version of "
    f"{PRODUCT} and can't be resumed ({{detail}}).",
    Failure.GAVE_UP: "Something kept failing while running this task, so it was stopped.",
    Failure.MCP_UNAVAILABLE: "The MCP server `{detail}` could not be reached (the worker kept "
    "retrying), so the run stopped and nothing more was run. Check that the server is up, then "
    "ask again.",
    Failure.OUTCOME_LOST: "`{detail}` may have run; its result was lost, so it was not run "
    "again and the run stopped. Check whether it took effect before asking again.",
    Failure.OUTPUT_HELD: "`{detail}` ran, and its rule holds its output for a person, but the "
    "policy let it run without a card, so nobody could release it: the agent never read it and "
    "the run stopped. Give the rule approvers (no `auto`) to review its output.",
    Failure.ARGUMENTS_REFUSED: "The model asked for a call too large to show or check "
    "({detail}), so nothing was run and the run stopped.",
}


def run_failed(run_id: str, failure: Failure, detail: str, ran: Sequence[str] = ()) -> str:
    text = FAILURES[failure].format(detail=escape(detail) or "no details")
    if ran:
        # "It failed" must not read as "nothing happened": say what did run.
        tools = ", ".join(f"`{escape(tool)}`" for tool in ran)
        text = f"{tools} ran; then the run failed: {text}"
    return f":x: {text} Run `{run_id}`: an admin can find it in the logs."


FINAL_LIMIT = 39_000


def final_answer(output: str) -> str:
    text = escape(output.strip()) or "(the agent finished without a message)"
    if len(text) > FINAL_LIMIT:
        text = text[:FINAL_LIMIT] + "\n…(shortened)"
    return text
