"""An offline model for the bundled example agents: its replies are scripted from the task text.

With no `OPENAI_API_KEY` and the default registry, the worker runs `runtime.examples` on this
model, so a first run reaches real approvals of real tools without an account. It is the SDK's
own `agents.testing.ScriptedModel`, given one responder step per model call: the SDK runs the
tools, the approvals and the hand-offs exactly as with a real model; only the words are canned.

It understands tasks like "delete u-100", "restart the api", "list users", "refund o-1 1200"
(cents; billing's tool, so ops hands off first; `"1200"`, quoted, is sent as a string), "list
tables", "drop the orders table" and "archive the orders table" (tools of the `db` MCP server,
whose `archive_table` asks the person where to, mid-call), "greet me in spanish"
(`respond_spanish`, an agent used as a tool, whose `spanish` agent asks for `get_user_name`),
joined with "and". The `shell` agent runs its whole
task as one shell command ("shell: echo hello >> notes.txt"). Each answer says it came
from a scripted model, so nobody mistakes it for a real one in Slack either.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agents import Model, ModelProvider, RunConfig
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
)
from openai.types.responses.response_function_shell_tool_call import (
    Action,
    ResponseFunctionShellToolCall,
)

from runtime.decisions.edits import EDIT_NOTE_END, EDIT_NOTE_START
from runtime.runs.state_decisions import not_run_reason
from runtime.settings import RuntimeSettings

ANSWER_HEADING = "Scripted model (no OPENAI_API_KEY set): these words are canned"
"""The first line of each answer, once: it goes on to say whether any tool ran."""
SERVICES = ("api", "billing", "search")
OUTPUT_LIMIT = 600
LITERAL_LIMIT = 100_000
"""A longer output is shown as text, not read as a value."""
TASK_LIMIT = 200
EXAMPLES = (
    "`delete u-100`",
    "`restart the api`",
    "`list users`",
    "`refund o-5521 1200` (cents)",
    "`delete u-101 and restart search`",
    "`drop the orders table` (a tool of an MCP server)",
    "`greet me in spanish` (an agent used as a tool, which asks too)",
    "`shell: echo hello >> notes.txt` (the shell agent)",
)
SHELL_TOOL = "shell"
WORDS_PER_DELTA = 3
DELTA_PAUSE_SECONDS = 0.03
"""A streamed answer of the script's comes about a hundred words a second."""


@dataclass(frozen=True, slots=True)
class Intent:
    """One tool call the task asks for, and the agent whose tool it is."""

    tool: str
    arguments: dict[str, Any]
    owner: str = "ops"


def intents_of(task: str) -> list[Intent]:
    """The tool calls a task asks for, in the order it names them."""
    found: list[Intent] = []
    for clause in re.split(r"\band\b|\bthen\b|[,;\n]", task, flags=re.IGNORECASE):
        words = clause.lower()
        if re.search(r"\b(delete|remove)\b", words):
            found += [Intent("delete_user", {"user_id": u}) for u in re.findall(r"\bu-\d+", words)]
        if re.search(r"\brestart", words):
            named = [s for s in SERVICES if re.search(rf"\b{s}\b", words)]
            other = re.findall(r"\brestart\w*\s+(?:the\s+)?([\w-]+)", words)
            found += [Intent("restart_service", {"service": s}) for s in named or other[:1]]
        if re.search(r"\brefund", words):
            order = re.search(r"\bo-[\w-]+", words)
            amount = re.search(r'(?<![\w.-])("?)(\d{1,9})\1(?![\w.-])', words)
            if order and amount:
                # A quoted amount is sent as a string, as a model may: the tool gets a number.
                cents: int | str = amount[2] if amount[1] else int(amount[2])
                arguments = {"order_id": order[0], "amount_cents": cents}
                found.append(Intent("refund_order", arguments, owner="billing"))
        if re.search(r"\blist\b", words) and "user" in words:
            found.append(Intent("list_users", {}))
        if re.search(r"\blist\b", words) and "table" in words:
            found.append(Intent("list_tables", {}))
        archived = re.findall(r"\barchive\s+(?:the\s+)?(?:table\s+)?([\w-]+)", words)
        found += [Intent("archive_table", {"table": t}) for t in archived if t != "table"]
        dropped = re.findall(r"\bdrop\s+(?:the\s+)?(?:table\s+)?([\w-]+)", words)
        found += [Intent("drop_table", {"table": t}) for t in dropped if t != "table"]
        if re.search(r"\bspanish\b", words):
            # ops passes the clause to `spanish`, whose own run reads it again: this script
            # then asks for that agent's tool, `get_user_name`.
            found.append(Intent("respond_spanish", {"input": clause.strip()}))
            found.append(Intent("get_user_name", {}, owner="spanish"))
    return found


def _field(item: Any, name: str) -> Any:
    """Input items are dicts when restored from a saved run, models when fresh."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _task(items: list[Any]) -> str:
    """The person's latest words: a reply in a thread follows the earlier turns."""
    for item in reversed(items):
        if _field(item, "role") == "user":
            content = _field(item, "content")
            if isinstance(content, str):
                return content
            return " ".join(str(_field(part, "text") or "") for part in content or [])
    return ""


@dataclass(frozen=True, slots=True)
class _Called:
    name: str
    arguments: dict[str, Any]
    output: str | None


def _history(items: list[Any]) -> list[_Called]:
    outputs = {
        _field(i, "call_id"): _output_text(_field(i, "output"))
        for i in items
        if _field(i, "type") in ("function_call_output", "shell_call_output")
    }
    called = []
    for item in items:
        if _field(item, "type") == "shell_call":
            commands = list(_field(_field(item, "action"), "commands") or [])
            output = outputs.get(_field(item, "call_id"))
            called.append(_Called(SHELL_TOOL, {"commands": commands}, output))
        if _field(item, "type") != "function_call":
            continue
        try:
            arguments = json.loads(_field(item, "arguments") or "{}")
        except ValueError:
            arguments = {}
        name = str(_field(item, "name"))
        called.append(_Called(name, arguments, outputs.get(_field(item, "call_id"))))
    return called


def _output_text(output: Any) -> str:
    """A function tool's output is text; an MCP tool's is a list of content parts, a shell
    call's a list of each command's output."""
    if isinstance(output, list):
        parts = (_field(p, "text") or _field(p, "stdout") or _field(p, "stderr") for p in output)
        return " ".join(str(part or "") for part in parts).strip()
    return str(output)


def scripted_reply(call: ModelCall) -> list[TResponseOutputItem]:
    """The next model output for a run of the example agents, from the task and the history."""
    items = [call.input] if isinstance(call.input, str) else list(call.input)
    task = call.input if isinstance(call.input, str) else _task(items)
    history = _history(items)
    tools = {tool.name for tool in call.tools}
    if SHELL_TOOL in tools and task.strip() and not any(c.name == SHELL_TOOL for c in history):
        return [_shell_call(task.strip())]
    handoffs = {handoff.agent_name: handoff.tool_name for handoff in call.handoffs}
    wanted = [
        intent
        for intent in intents_of(task)
        if not any(c.name == intent.tool and c.arguments == intent.arguments for c in history)
    ]
    calls = [
        function_call(i.tool, i.arguments, call_id=_call_id()) for i in wanted if i.tool in tools
    ]
    if calls:
        return calls
    for intent in wanted:
        handoff = handoffs.get(intent.owner)
        if handoff and not any(c.name == handoff for c in history):
            return [function_call(handoff, {}, call_id=_call_id())]
    return [assistant_message(_answer(history, task), item_id=f"msg_{secrets.token_hex(6)}")]


def _answer(history: list[_Called], task: str) -> str:
    named = [c.output for c in history if c.name == "get_user_name" and c.output is not None]
    if named and not not_run_reason("get_user_name", named[0]):
        # The `spanish` agent runs only as `ops`'s tool: ops's answer says it is canned, once.
        return f"¡Hola, {named[0]}!"
    done = [c for c in history if not c.name.startswith("transfer_to_") and c.output is not None]
    if not done:
        return (
            f"{ANSWER_HEADING}; no tool ran.\nIt did not understand "
            f"“{_shorten(task, TASK_LIMIT)}”. Try "
            + ", ".join(EXAMPLES)
            + ", or set OPENAI_API_KEY to use a real model."
        )
    lines = []
    ran = False
    for c in done:
        # A call that did not run: say why in the script's words, not the words meant for a model.
        why = not_run_reason(c.name, c.output or "")
        ran = ran or not why
        lines.append(f"• `{c.name}` {why}" if why else f"• `{c.name}`: {_readable(c.output or '')}")
    heading = (
        f"{ANSWER_HEADING}, the tools ran for real." if ran else f"{ANSWER_HEADING}; no tool ran."
    )
    return heading + "\n" + "\n".join(lines)


def _readable(output: str) -> str:
    """A tool's output as a person reads it: without the note an edit leaves for the model
    (the card shows the edit), and a value (the SDK hands the model `str()` of what a tool
    returned: a Python repr) as pretty JSON."""
    note_end = output.find(EDIT_NOTE_END)
    edited = note_end >= 0 and output.startswith(EDIT_NOTE_START)
    if edited:
        output = output[note_end + len(EDIT_NOTE_END) :]
    text = _shorten(output)
    value = None
    if len(output) <= LITERAL_LIMIT:
        with contextlib.suppress(ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = ast.literal_eval(output.strip())
    if isinstance(value, dict | list):
        text = "\n```\n" + _shorten(json.dumps(value, indent=2, ensure_ascii=False)) + "\n```"
    return f"(with the edited arguments) {text}" if edited else text


def _shorten(text: str, limit: int = OUTPUT_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _shell_call(command: str) -> TResponseOutputItem:
    call_id = _call_id()
    return ResponseFunctionShellToolCall(
        type="shell_call",
        id=f"sh_{call_id}",
        call_id=call_id,
        action=Action(commands=[command]),
        status="completed",
    )


def _call_id() -> str:
    # Unique per call: the example refund tool uses it as its idempotency key.
    return f"call_{secrets.token_hex(8)}"


class WritingScriptedModel(ScriptedModel):
    """A `ScriptedModel` whose streamed answers come a few words at a time, as a real model's
    do (`WORDS_PER_DELTA` words, `DELTA_PAUSE_SECONDS` apart): the console shows the text
    being written. Its shell calls stream too (the SDK's own streaming has no events for them)."""

    async def stream_response(
        self, *arguments: Any, **options: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        response = await self.get_response(*arguments, **options)
        for item in response.output:
            if not isinstance(item, ResponseOutputMessage):
                continue
            for part in item.content:
                if not isinstance(part, ResponseOutputText):
                    continue
                words = re.findall(r"\S+\s*|\s+", part.text)
                for start in range(0, len(words), WORDS_PER_DELTA):
                    await asyncio.sleep(DELTA_PAUSE_SECONDS)
                    delta = "".join(words[start : start + WORDS_PER_DELTA])
                    yield ResponseTextDeltaEvent.model_construct(
                        type="response.output_text.delta", item_id=item.id, delta=delta
                    )
        completed = Response.model_construct(
            id=response.response_id or f"resp_{secrets.token_hex(6)}",
            output=list(response.output),
            usage=None,
            status="completed",
        )
        yield ResponseCompletedEvent.model_construct(type="response.completed", response=completed)


class ScriptedModelProvider(ModelProvider):
    """A fresh one-step `ScriptedModel` per model call: runs share nothing, nothing piles up."""

    def get_model(self, model_name: str | None) -> Model:
        return WritingScriptedModel([ModelStep.respond(scripted_reply)])


def uses_scripted_model(settings: RuntimeSettings) -> bool:
    """No OpenAI key and the bundled example agents: the only case a script can serve."""
    default_agents = type(settings).model_fields["agents"].default
    return settings.openai_api_key is None and settings.agents == default_agents


def model_run_config(settings: RuntimeSettings) -> RunConfig | None:
    """The worker's run config: the scripted model when `uses_scripted_model`, else the SDK's
    default (OpenAI, configured by the usual `OPENAI_*` variables)."""
    if not uses_scripted_model(settings):
        return None
    # Tracing would try to export to OpenAI, and warn that there is no key.
    return RunConfig(model_provider=ScriptedModelProvider(), tracing_disabled=True)
