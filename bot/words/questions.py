"""What people read of an MCP server's questions mid-call (`elicitation/create`)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.words.runs import and_list, escape, slack_date, user

ANSWER = "Answer"
DECLINE = "Decline"
DONE = "Done"
FORM_TITLE = "Answer the server"
FORM_SUBMIT = "Send"
FORM_CANCEL = "Cancel"
YES = "Yes"
NO = "No"

NOT_A_NUMBER = "Write a number, such as 3 or 2.5."
NOT_A_WHOLE_NUMBER = "Write a whole number, such as 3."
QUESTION_GONE = "This question is no longer open: its run has ended."
QUESTION_ENDED = (
    "This question is no longer waiting: the call that asked it has ended (its worker stopped). "
    "The run's thread says what happens next."
)
QUESTION_EXPIRED = "Too late: the time to answer this question is up, so it was cancelled."
TRY_AGAIN = "Countersign could not reach its database just now; please try again."


def asked(server: str, tool: str, requester: str, message: str, *, url: bool) -> str:
    """The question's message: who asks, for which call, and what."""
    how = "asks you to open a link" if url else "asks"
    text = escape(message.strip())[:2500] or "(no text)"
    return (
        f":speech_balloon: MCP server `{escape(server)}` {how}, while running "
        f"`{escape(tool)}` for {user(requester)}:\n>{text}"
    )


def link_line(url: str) -> str:
    return f"<{escape(url)}|{escape(url)[:200]}>"


def who_answers(responders: Sequence[str], requester: str, deadline: float) -> str:
    names = [f"<!subteam^{p}>" if p.startswith("S") else user(p) for p in responders]
    who = and_list(names) if names else user(requester)
    return f"{who} may answer until {slack_date(deadline)}; nobody answering cancels it."


def copy_of(channel: str) -> str:
    return f"A copy of a question asked in <#{channel}>; answer here or there."


def settled(state: str, by: str) -> str:
    """How a question ended, on its messages."""
    if by == "timeout":
        return ":hourglass: Nobody answered in time: the server was told `cancel`."
    if by == "stopped":
        return ":heavy_minus_sign: The run was stopped: the server was told `cancel`."
    if by == "ended":
        return ":heavy_minus_sign: The call ended before anyone answered."
    if state == "accept":
        return f":white_check_mark: {user(by)} answered."
    if state == "decline":
        return f":no_entry_sign: {user(by)} declined."
    return f":heavy_minus_sign: {user(by)} cancelled."


def timed_out(server: str, seconds: int) -> str:
    return (
        f":alarm_clock: Nobody answered MCP server `{escape(server)}`'s question within "
        f"{seconds} s, so it was cancelled; the call goes on with that answer."
    )


def not_a_responder(responders: Sequence[str], requester: str) -> str:
    if not responders:
        return f"Only {user(requester)}, who started this run, may answer this question."
    names = [f"<!subteam^{p}>" if p.startswith("S") else user(p) for p in responders]
    return f"Only {and_list(names)} may answer this question (the policy says so)."


def answered_before(state: str, by: str) -> str:
    return "This question was already answered. " + settled(state, by)


def form_context(server: str, message: str) -> str:
    return f"`{escape(server)}` asks: {escape(message.strip())[:1500]}"
