"""What a proposed policy would have done with every past call (`python -m runtime policy
backtest POLICY.toml [--since DATE] [--until DATE] [--json]`).

Each call the trail holds (`runtime.review.history`) is put to the proposed policy through the
same judgement the processes use (`runtime.policy.verdicts`), so whatever a rule can match on
is replayed too; the call is judged on what the trail kept of it (tool, agent, MCP server,
channel, requester, and its arguments as the tool received them, when kept: a `when` rule is
replayed on them). A `when` that cannot be judged for a call is reported as the card reports
it (the rule and why), and the call is judged under it and the rule it falls under otherwise.
`--json` writes one line per call; otherwise `Summary` counts the calls that would have run with
no person, been blocked, asked a person where none was, gone to other approvers or needed
another quorum, and lists the differences, most frequent first.

Calls that never asked anyone because their tool needs no approval are not in the trail: a rule
that would make them ask (an `mcp_server` rule over a server's own `require_approval`) cannot be
backtested.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, TextIO

from runtime.audit.trail import AuditTrail
from runtime.jobs.contracts import Conversation
from runtime.judging.arguments import JudgedArguments
from runtime.policy import Policy
from runtime.policy.verdicts import judge as judge_call
from runtime.record.call_rule import CallRule
from runtime.review.history import PastCall, past_calls
from runtime.review.names import KnownNames

Would = Literal["auto_approve", "auto_reject", "ask"]
Change = Literal["no_person", "blocked", "asks", "approvers", "quorum"]
CHANGES: dict[Change, str] = {
    "no_person": "would run with no person",
    "blocked": "would be blocked",
    "asks": "would ask a person (none was asked)",
    "approvers": "would go to other approvers",
    "quorum": "would need another quorum",
}
WAS_WORDS: dict[str, str] = {
    "auto_approved": "approved by policy",
    "auto_rejected": "rejected by policy",
    "granted": "approved by a grant",
    "answered": "answered instead by a person",
}
"""What became of a past call, in words (the others are words already: `approved`, ...)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    would: Would
    rule: str | None
    """Where in the policy file the rule is (`policy.toml:12`); None: no rule matched, the
    environment's defaults apply."""
    approvers: tuple[str, ...]
    """Empty: anyone in the channel."""
    quorum: int
    changes: tuple[Change, ...]
    unjudged: tuple[str, ...] = ()
    """Each rule whose `when` could not be judged for the call, where it is and why
    (`policy.toml:12: the call has no `amount_cents``), as the card would say."""


async def judge(call: PastCall, policy: Policy, source: str) -> Verdict:
    """What `policy` (read from `source`) would have done with `call`."""
    # The processes' own judgement, with what the trail kept: a `when` rule is replayed on the
    # kept arguments, and cannot be judged where they were not kept.
    verdict = await judge_call(
        policy,
        tool=call.tool,
        agent=call.agent,
        mcp_server=call.mcp_server,
        arguments=JudgedArguments(text=call.arguments) if call.arguments is not None else None,
        conversation=Conversation(channel=call.channel, requester=call.requester),
    )
    rule = verdict.rule
    # The rule that chose who decides; with rules that could not be judged, the first of them.
    where = None if rule.index is None else _where(policy, source, rule.index)
    would = _would(rule)
    return Verdict(
        would=would,
        rule=where,
        approvers=rule.approvers,
        quorum=rule.quorum,
        changes=_changes(call, rule, would),
        unjudged=tuple(f"{_where(policy, source, u.index)}: {u.reason}" for u in rule.unjudged),
    )


def _where(policy: Policy, source: str, index: int) -> str:
    return f"{source}:{policy.rule_lines[index]}"


def _would(rule: CallRule) -> Would:
    if rule.auto == "approve":
        return "auto_approve"
    if rule.auto == "reject":
        return "auto_reject"
    return "ask"


def _changes(call: PastCall, rule: CallRule, would: Would) -> tuple[Change, ...]:
    asked = call.was not in ("auto_approved", "auto_rejected")
    if would == "auto_approve":
        return () if call.was == "auto_approved" else ("no_person",)
    if would == "auto_reject":
        return () if call.was == "auto_rejected" else ("blocked",)
    if not asked:
        return ("asks",)
    changes: list[Change] = []
    # Entries that do not say (a grant's use, older entries) are not compared.
    if call.approvers is not None and set(call.approvers) != set(rule.approvers):
        changes.append("approvers")
    if call.quorum is not None and call.quorum != rule.quorum:
        changes.append("quorum")
    return tuple(changes)


def json_line(call: PastCall, verdict: Verdict) -> str:
    """One call and its verdict, as a line of `--json`."""
    line: dict[str, object] = {
        "run_id": call.run_id,
        "call_id": call.call_id,
        "approval_id": call.approval_id,
        "at": dt.datetime.fromtimestamp(call.at, dt.UTC).isoformat(),
        "tool": call.tool,
        "agent": call.agent,
        **({"mcp_server": call.mcp_server} if call.mcp_server else {}),
        "channel": call.channel,
        "requester": call.requester,
        "args_digest": call.digest,
        "arguments_kept": call.arguments is not None,
        **({"arguments_note": call.arguments_note} if call.arguments_note else {}),
        "was": call.was,
        "decided_by": call.decided_by,
        "would": verdict.would,
        "rule": verdict.rule,
        "approvers": list(verdict.approvers),
        "quorum": verdict.quorum,
        "changes": list(verdict.changes),
        **({"unjudged": list(verdict.unjudged)} if verdict.unjudged else {}),
    }
    return json.dumps(line, ensure_ascii=False)


@dataclass(kw_only=True)
class Summary:
    """Counts, kept as the calls stream by: what a person reads first."""

    source: str
    calls: int = 0
    changed_calls: int = 0
    without_arguments: int = 0
    unjudged: Counter[str] = field(default_factory=Counter)
    """Rule (`file:line: why`) -> calls it could not be judged for."""
    first: float | None = None
    last: float | None = None
    changed: Counter[Change] = field(default_factory=Counter)
    was_of_change: dict[Change, Counter[str]] = field(default_factory=dict)
    differences: Counter[tuple[str, str, Verdict]] = field(default_factory=Counter)
    """(tool and agent, what the call was, the verdict without its changes) -> calls."""

    def add(self, call: PastCall, verdict: Verdict) -> None:
        self.calls += 1
        self.without_arguments += call.arguments is None
        self.unjudged.update(verdict.unjudged)
        self.first = call.at if self.first is None else min(self.first, call.at)
        self.last = call.at if self.last is None else max(self.last, call.at)
        for change in verdict.changes:
            self.changed[change] += 1
            self.was_of_change.setdefault(change, Counter())[call.was] += 1
        if verdict.changes:
            self.changed_calls += 1
            where = f"{call.tool} ({call.agent}" + (
                f", MCP {call.mcp_server})" if call.mcp_server else ")"
            )
            self.differences[(where, call.was, replace(verdict, changes=()))] += 1

    def principals(self) -> set[str]:
        """The people and groups `text` names, to look their names up first."""
        return {p for (_, _, verdict) in self.differences for p in verdict.approvers}

    def text(self, names: Mapping[str, str] | None = None) -> str:
        """`names` (from `runtime.review.names`): `@alice` where known, else the ids."""
        if self.calls == 0:
            return f"Backtest of {self.source}: the trail holds no calls in that range."
        span = _span(self.first or 0, self.last or 0)
        lines = [f"Backtest of {self.source}: {self.calls} past call(s), {span}."]
        if self.without_arguments:
            lines.append(
                f"{self.without_arguments} without their arguments in the trail, judged on tool "
                "and agent alone."
            )
        lines.append("")
        width = max(len(words) for words in CHANGES.values())
        for change, words in CHANGES.items():
            count = self.changed[change]
            outcomes = self.was_of_change.get(change, Counter())
            now = ", ".join(f"{n} {_was(outcome)}" for outcome, n in outcomes.most_common())
            lines.append(f"  {words:<{width}}  {count:>6}" + (f"  (were: {now})" if now else ""))
        unchanged = self.calls - self.changed_calls
        lines.append(f"  {'unchanged':<{width}}  {unchanged:>6}")
        if self.unjudged:
            lines += ["", "Rules that could not be judged (the stricter of both applied):"]
            for rule, count in self.unjudged.most_common():
                lines.append(f"  {count:>6}  {rule}")
        if self.differences:
            lines += ["", "Differences, most frequent first:"]
            for (where, was, verdict), count in self.differences.most_common():
                would = _would_words(verdict, names or {})
                rule = verdict.rule or "no rule (the defaults)"
                lines.append(f"  {count:>6}  {where}: was {_was(was)}, would {would}  [{rule}]")
        return "\n".join(lines)


def _was(outcome: str) -> str:
    return WAS_WORDS.get(outcome, outcome)


def _would_words(verdict: Verdict, names: Mapping[str, str]) -> str:
    if verdict.would == "auto_approve":
        return "auto-approve"
    if verdict.would == "auto_reject":
        return "auto-reject"
    people = [names.get(p, p) for p in verdict.approvers]
    who = ", ".join(people) if people else "anyone in the channel"
    return f"ask {who}" + (f" (quorum {verdict.quorum})" if verdict.quorum > 1 else "")


def _span(first: float, last: float) -> str:
    """`2026-12-05 07:45:32 to 07:46:34 UTC`: the date once when both are on the same day."""
    start = dt.datetime.fromtimestamp(first, dt.UTC)
    end = dt.datetime.fromtimestamp(last, dt.UTC)
    shown_end = end.strftime("%H:%M:%S" if end.date() == start.date() else "%Y-%m-%d %H:%M:%S")
    return f"{start:%Y-%m-%d %H:%M:%S} to {shown_end} UTC"


async def backtest(
    trail: AuditTrail,
    policy: Policy,
    source: str,
    *,
    since: dt.datetime,
    until: dt.datetime | None,
    as_json: bool,
    out: TextIO,
    names: KnownNames | None = None,
) -> int:
    """Write the backtest of every call asked from `since` to `until` to `out` (JSON lines,
    or the summary, with `names` where known); the number of calls."""
    summary = Summary(source=source)
    entries = trail.since(since)
    async for call in past_calls(entries, until=until.timestamp() if until else None):
        verdict = await judge(call, policy, source)
        if as_json:
            out.write(json_line(call, verdict) + "\n")
        summary.add(call, verdict)
    if not as_json:
        known = await names.of(summary.principals()) if names else {}
        out.write(summary.text(known) + "\n")
    return summary.calls
