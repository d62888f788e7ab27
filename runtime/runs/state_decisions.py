"""Applying recorded decisions to a restored SDK RunState: what the model is told.

What is approved is what runs: an approval carries the digest of the call that was shown, and a
call whose restored tool name and arguments (and, for an MCP tool, server) no longer match it is
refused, not run.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, RunState, ToolApprovalItem

from runtime.agent_graph import reachable_agents
from runtime.calls.description import tool_kind
from runtime.calls.digest import call_digest
from runtime.journal.held import withheld_message
from runtime.mcp.origin import mcp_server_of
from runtime.record.call_rule import UNAPPROVABLE
from runtime.record.choices import ArgumentEdit
from runtime.record.envelope import Decision, PendingCall, RunEnvelope
from runtime.runs.call_context import editable_schema, judged_arguments
from runtime.runs.lost_outcomes import not_run_again_message

log = logging.getLogger(__name__)


TELL_THE_USER = "Tell the user it was not done."
"""Said to the model, not to people: a tool result reporting a call that did not run ends so."""


def not_run_reason(tool: str, output: str) -> str | None:
    """For a tool result made here (the call did not run): why, in words fit for people, e.g.
    "was rejected by carol. Reason: ..." (the id the model reads left out); None for a real
    tool output."""
    prefix = f"The call to {tool} "
    if not output.startswith(prefix):
        return None
    reason = output.removeprefix(prefix).replace(TELL_THE_USER, "").strip()
    return _SLACK_ID_AFTER_NAME.sub("", reason, count=1)


# `rejected by carol (UCAROL). Reason:`: people read the name; the id is for the model.
_SLACK_ID_AFTER_NAME = re.compile(r"(?<=\S) \([UW][A-Z0-9]{2,31}\)(?=\. Reason: )")


def rejection_message(decision: Decision | None, tool: str) -> str:
    """The tool result the model sees instead of the tool's output."""
    if decision is None:
        return f"The call to {tool} was not run: no decision was recorded for it."
    if decision.outcome == "expired":
        return (
            f"The call to {tool} was not run: no one approved or rejected it in time, "
            f"so the request expired. {TELL_THE_USER}"
        )
    if decision.by_policy:
        # Why, where the rules themselves left nobody to ask (`runtime.record.call_rule`).
        why = decision.reason or ""
        detail = f". {why}" if why.startswith(UNAPPROVABLE) else ""
        return f"The call to {tool} was not run: the approval policy does not allow it{detail}."
    who = decision.user_name or decision.user_id or "an approver"
    if decision.user_name and decision.user_id:
        who = f"{decision.user_name} ({decision.user_id})"
    reason = (decision.reason or "").strip() or "no reason given"
    return f"The call to {tool} was rejected by {who}. Reason: {reason}"


def speaker(user_name: str | None, user_id: str | None) -> str:
    """How the model reads who spoke at a call: `@alice` (their Slack name), else their id."""
    return f"@{user_name or user_id or 'an approver'}"


def answered_message(decision: Decision, tool: str) -> str:
    """The tool result the model reads for a call a person answered in the tool's place
    (**Answer instead**): framed so it knows a person gave it, not the tool."""
    who = speaker(decision.user_name, decision.user_id)
    return f"{who} answered instead of running `{tool}`: {(decision.answer or '').strip()}"


def notes_message(decision: Decision | None) -> str | None:
    """What the model reads after an approved tool's output: each approver's note
    (**Approve with a note…**), one per line ("Note from @alice: …"); None without any."""
    if decision is None or decision.outcome not in ("approved", "approved_always"):
        return None
    lines = [f"Note from {speaker(a.user_name, a.user_id)}: {a.note}" for a in decision.notes]
    return "\n".join(lines) if lines else None


def refusal_message(tool: str) -> str:
    return (
        f"The call to {tool} was not run: its arguments changed after it was approved, so the "
        "approval does not cover it. Ask for approval again if it is still needed."
    )


@dataclass
class Applied:
    approved: list[PendingCall] = field(default_factory=list)
    refused: list[PendingCall] = field(default_factory=list)
    """Approved, but the call in the state is not the call that was approved."""


def binds(
    decision: Decision, call: PendingCall, item: ToolApprovalItem, server: str | None
) -> bool:
    """Whether the approval covers the call in the state (`server`: the MCP server it would
    run on, None for a function tool). An edited approval covers the model's call it was made
    on (its original digest), run with the edited arguments, whose digest the approval binds;
    and only where the tool can run with them (`editable_schema`: never an MCP tool). Both
    digests cover the arguments as the tool receives them (`runtime.judging.arguments`)."""
    tool = item.name or "?"
    model_digest = call_digest(tool, judged_arguments(item).text, server, kind=tool_kind(item))
    if decision.edit is None:
        return not decision.digest or decision.digest == model_digest
    edited_digest = call_digest(tool, decision.edit.arguments, server)  # as approved: well typed
    return (
        model_digest == call.digest
        and decision.digest == decision.edit.digest == edited_digest
        and editable_schema(item) is not None
    )


def missing_tools(
    state: RunState[Any, Any],
    root: Agent[Any],
    mcp_tools: Callable[[Agent[Any]], Collection[str]] | None = None,
) -> list[tuple[str, str]]:
    """(agent, tool) of pending calls whose agent no longer offers the tool (after a deploy),
    or is no longer reachable from the run's agent `root` (`runtime.agent_graph`: a hand-off or
    an agent tool, at any depth).

    `mcp_tools` names the tools an agent's MCP servers offer (as listed when the state was
    restored), so a waiting MCP call is not taken for a removed tool.
    """
    reachable = reachable_agents([root])
    missing = []
    for item in state.get_interruptions():
        raw = item.raw_item
        kind = raw.get("type") if isinstance(raw, dict) else getattr(raw, "type", None)
        agent = next((a for a in reachable if a is item.agent), None) or next(
            (a for a in reachable if a.name == item.agent.name), None
        )
        offered = {getattr(tool, "name", None) for tool in agent.tools} if agent else set()
        if mcp_tools is not None and agent is not None:
            offered.update(mcp_tools(agent))
        if kind == "function_call" and item.name and item.name not in offered:
            missing.append((item.agent.name, item.name))
    return missing


def apply_decisions(
    state: RunState[Any, Any],
    calls: tuple[PendingCall, ...],
    server_of: Callable[[ToolApprovalItem], str | None] = mcp_server_of,
) -> Applied:
    """Approve or reject every pending interruption.

    Items must come from the restored state's own `get_interruptions()`: the SDK matches them
    by identity. `server_of` says which MCP server a call would run on (None: a function tool).
    """
    by_call_id = {call.call_id: call for call in calls}
    applied = Applied()
    for item in state.get_interruptions():
        tool = item.name or "?"
        call = by_call_id.get(item.call_id or "")
        decision = call.decision if call else None
        if call is not None and call.held is not None and decision is not None:
            # It ran already: approved, the journal gives the model its released output; else
            # the model reads the edited output (an answer) or why it was withheld.
            if decision.outcome in ("approved", "approved_always"):
                state.approve(item)
            else:
                state.reject(item, rejection_message=withheld_message(decision, tool))
            continue
        if call is None or decision is None or decision.outcome in ("rejected", "expired"):
            if call is None:
                log.warning("interruption %s has no stored approval; rejecting it", item.call_id)
            message = rejection_message(decision, tool)
            if call is not None and call.lost:  # not "it was not done": it may have been
                message = not_run_again_message(tool, message.replace(TELL_THE_USER, "").strip())
            state.reject(item, rejection_message=message)
            continue
        if decision.outcome == "answered":
            # The tool does not run: the model reads the person's answer as its result.
            state.reject(item, rejection_message=answered_message(decision, tool))
            continue
        if not binds(decision, call, item, server_of(item)):
            state.reject(item, rejection_message=refusal_message(tool))
            applied.refused.append(call)
            continue
        # Never the SDK's `always_approve`: it is keyed by tool name, and later calls would
        # never come back to the policy. An Approve always is a permission of the run instead
        # (`runtime.record.permissions`), checked at each later call.
        state.approve(item)
        applied.approved.append(call)
    return applied


def without_sticky_approvals(state_json: str) -> str:
    """A saved SDK state without any decision that covers a tool's later calls (an earlier
    version's `always_approve`): those calls come back to the policy instead. Decisions of
    single calls stay as they are."""
    try:
        data = json.loads(state_json)
        context = data["context"]
    except (ValueError, KeyError, TypeError):
        return state_json  # the SDK says what is wrong with it
    changed = False
    records = list((context.get("approvals") or {}).values()) if isinstance(context, dict) else []
    for name in ("function_tool_approvals", "hosted_mcp_approvals"):
        entries = context.get(name) if isinstance(context, dict) else None
        records += [e.get("decision") for e in entries or [] if isinstance(e, dict)]
    for record in records:
        if isinstance(record, dict) and record.get("approved") is True:
            record["approved"] = []
            changed = True
    return json.dumps(data, separators=(",", ":")) if changed else state_json


def approved_notes(envelope: RunEnvelope) -> dict[str, str]:
    """Call id -> the approvers' notes the model reads after the tool's output."""
    found = {call.call_id: notes_message(call.decision) for call in envelope.calls}
    return {call_id: text for call_id, text in found.items() if text}


def approved_edits(envelope: RunEnvelope) -> dict[str, ArgumentEdit]:
    """Call id -> the edited arguments its approval binds: what the tool runs with."""
    return {
        call.call_id: call.decision.edit
        for call in envelope.calls
        if call.decision is not None
        and call.decision.edit is not None
        and call.decision.outcome in ("approved", "approved_always")
    }
