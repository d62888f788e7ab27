"""What the app says in its own messages (its Messages tab, a direct message with it) and on the
cards of the runs started there, which go to the approvers' channel."""

from __future__ import annotations

NO_APPROVAL_CHANNEL = (
    "This can't start here yet: cards for runs asked for in a direct message go to the "
    "approvers' channel, and none is set, so an admin needs to set APPROVAL_CHANNEL (or a "
    "policy rule's `channel`) to a channel's id."
)
"""A run asked for in a direct message, with neither `APPROVAL_CHANNEL` nor a rule's `channel`
set: one sentence to the requester, which also tells them what an admin must set."""
NO_APPROVAL_CHANNEL_LOG = (
    "%s by %s in a direct message not started: set APPROVAL_CHANNEL (or a policy rule's "
    "`channel`) to the channel where approvers decide"
)
"""The same, as the admin reads it in the log (the way it was asked, and who asked)."""

NOT_A_TASK = (
    "Write a task for the agent (or `<agent>: <task>` to pick one); `/agent help` lists the "
    "agents and the commands."
)
"""A message to the app that is a command's word rather than a task."""


def empty_task(agent: str) -> str:
    """A message naming an agent and nothing to do (a suggested prompt, sent as it is)."""
    return f"What should *{agent}* do? Write it after its name, as in `{agent}: <task>`."


NOT_STARTED = "Your message could not be passed on (the job queue is unreachable); try again."

PROMPTS_TITLE = "Start a run with an agent"
"""Above the suggested prompts of the Messages tab."""
PROMPTS_MOST = 4
"""Slack shows at most four suggested prompts."""
PROMPT_TITLE_LIMIT = 75


def prompt(agent: str, line: str) -> dict[str, str]:
    """One suggested prompt: the agent's name and its one line; clicking it sends
    `agent: ` followed by what the person types next (`bot.listeners.commands`)."""
    title = f"{agent}: {line}" if line else agent
    if len(title) > PROMPT_TITLE_LIMIT:
        title = title[: PROMPT_TITLE_LIMIT - 1] + "…"
    return {"title": title, "message": f"{agent}: {line}" if line else f"{agent}: "}


def asked_in_direct_message(requester: str, link: str | None) -> str:
    """Under a card in the approvers' channel: where it was asked, and the way back there."""
    where = f"<{link}|a direct message with the app>" if link else "a direct message with the app"
    return f"Asked by <@{requester}> in {where}."


def waiting_in_channel(tool: str, channel: str, link: str | None) -> str:
    """In the requester's thread: the call waits, and where its card is."""
    card = f"<{link}|its card>" if link else "its card"
    return f":hourglass_flowing_sand: `{tool}` waits for a decision in <#{channel}>: {card}."
