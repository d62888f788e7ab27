"""The words of `/agent` itself: the help, each command's usage, and what a mistyped one is told.

`bot.listeners.commands` parses with the same table (`COMMANDS`), so the help cannot list a
command the parser does not know, nor miss one it does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.words.runs import PRODUCT, escape, mcp_tool_list, names_list, shortened
from bot.words.stats import STATS_DAYS, STATS_MOST_DAYS

AUDIT_MOST = 100
"""`/agent audit N` shows at most this many events."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandWords:
    name: str
    aliases: tuple[str, ...] = ()
    arguments: str = ""
    """As the help writes them: `<run id>` is needed, `[run id]` may be left out."""
    summary: str
    takes: str = "nothing after it"
    """For a mistyped one: "`/agent stop` takes a run id"."""
    hint: str = ""


HELP = CommandWords(name="help", summary="this message")
STATUS = CommandWords(
    name="status",
    arguments="[run id]",
    summary="this channel's live runs and what they wait for, or one run",
    takes="nothing or a run id",
)
STOP = CommandWords(
    name="stop",
    aliases=("cancel",),
    arguments="<run id>",
    summary="stop a run: nothing more runs (`cancel` works too)",
    takes="a run id",
    hint="The run id is at the foot of the run's status message and in `/agent status`.",
)
GRANTS = CommandWords(name="grants", summary="grants active in this channel, to revoke them")
AUDIT = CommandWords(
    name="audit",
    arguments="[N | run id]",
    summary=(
        "who decided what in this channel: the last hour, "
        f"the last N events (1 to {AUDIT_MOST}) or one run"
    ),
    takes=f"how many events to show (1 to {AUDIT_MOST}) or a run id",
)
STATS = CommandWords(
    name="stats",
    arguments="[days]",
    summary=(
        "how decisions went in this channel: per tool, calls asked, their outcomes and the time "
        f"to decide; who decided most and who approved quickly (the last {STATS_DAYS} days, or "
        "the last N)"
    ),
    takes=f"a number of days (1 to {STATS_MOST_DAYS})",
)
COMMANDS = (HELP, STATUS, STOP, GRANTS, AUDIT, STATS)
"""Every command word, in the order the help lists them."""


def command_help(
    command: str,
    agents: Sequence[str],
    mcp_tools: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> str:
    """`mcp_tools`: agent -> (tool, server) as a worker last listed them; None when unknown."""
    listed = ", ".join(f"`{name}`" for name in agents)
    lines = [
        f"*{PRODUCT}* runs an AI agent on your task; every risky tool call waits for a person "
        "to approve it here.",
        f"• `{command} <task>`: run the default agent (`{agents[0]}`)",
        f"• `{command} <agent>: <task>`: pick an agent",
    ]
    for words in COMMANDS:
        usage = f"{command} {words.name} {words.arguments}".rstrip()
        lines.append(f"• `{usage}`: {words.summary}")
    first = names_list([f"`{word}`" for words in COMMANDS for word in (words.name, *words.aliases)])
    lines.append(
        f"A task that starts with {first} names its agent: "
        f"`{command} {agents[0]}: stop the nginx service`."
    )
    lines.append(f"Agents: {listed}")
    text = "\n".join(lines)
    for agent in agents:
        tools = (mcp_tools or {}).get(agent)
        if tools:
            text += f"\n• `{escape(agent)}` tools from MCP servers: " + mcp_tool_list(tools)
    return text


def command_usage(command: str, words: CommandWords, given: str, agent: str) -> str:
    """A command word followed by what it does not take: how to write it, and how to make the
    text a task instead. Nothing was started."""
    shown = escape(shortened(" ".join(given.split()), 60))
    told = f"`{command} {words.name}` takes {words.takes}"
    told += f", not `{shown}`" if shown else ""
    if words.arguments:
        told += f": `{command} {words.name} {words.arguments}`"
    told += "."
    if words.hint:
        told += f" {words.hint}"
    task = f"{words.name} {shown}".rstrip() if shown else f"{words.name} …"
    return (
        f"{told} Nothing was started. To give an agent a task that starts with "
        f'"{words.name}", name the agent: `{command} {agent}: {task}`.'
    )


RUN_AS_TASK = "Run as a task"
"""The button under "Did you mean …?" that starts the run after all."""


def command_did_you_mean(command: str, words: CommandWords, typed: str, agent: str) -> str:
    """One word near a command word (`stp`), or a command word without what it needs
    (`stop`): nothing was started, and **Run as a task** starts it if it was a task."""
    needed = words.arguments if words.arguments.startswith("<") else ""
    told = f"Did you mean `{f'{command} {words.name} {needed}'.rstrip()}`?"
    if words.hint:
        told += f" {words.hint}"
    return (
        f"{told} Nothing was started. If “{escape(shortened(typed, 60))}” is a task for "
        f"*{escape(agent)}*, press *{RUN_AS_TASK}*."
    )


def run_id_line(run_id: str) -> str:
    """At the foot of a run's status message: what `/agent stop` and `/agent audit` take."""
    return f"Run id `{run_id}`"


def command_unknown_agent(command: str, name: str, agents: Sequence[str]) -> str:
    listed = ", ".join(f"`{a}`" for a in agents)
    return (
        f"There is no agent called `{escape(name)}`. Agents: {listed}.\n"
        f"To give the default agent a task that starts with a word and a colon, name it: "
        f"`{command} {agents[0]}: {escape(name)}: ...`"
    )


def command_empty_task(command: str, agent: str) -> str:
    return (
        f"Say what *{escape(agent)}* should do: `{command} {escape(agent)}: <task>`. "
        "Nothing was started."
    )


def console_only(command: str, typed: str) -> str:
    """The console's composer, given another slash command than the app's."""
    return (
        f"The console sends only {command} (the app's one command), not {typed}: "
        f"try {command} help."
    )
