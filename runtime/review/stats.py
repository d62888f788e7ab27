"""How decisions go, read from the trail: per channel and tool, the calls that asked a person and
what became of them, how long people took, and who approved within seconds of being asked
(`/agent stats [days]`, `python -m runtime stats --since DATE`).

One pass over the trail: the calls and their outcomes come from `runtime.review.history`; the
`edited` entries, which are no call's outcome, are counted as they stream by. Time to decide runs
from the call's `requested` entry (written as its card is posted) to the entry that decided it,
for calls a person approved, rejected or answered instead (**Answer instead**: the tool did not
run, a person's answer stood for it); expiries and stops are counted, not timed. A **quick
approval** is an approval given within `QUICK_APPROVAL_SECONDS` of the call asking: one person
approving everything that fast is a sign of rubber-stamping.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditEntry
from runtime.review.history import PastCall, past_calls

OUTCOMES = ("approved", "rejected", "answered", "expired", "stopped")
"""The outcomes of a call that asked, as the table's columns (in this order)."""
TIMED = ("approved", "rejected", "answered")
MOST_DECIDERS = 5
"""How many of the people who decided most are listed."""


@dataclass(kw_only=True)
class ToolStats:
    asked: int = 0
    """Calls that asked a person (a card)."""
    outcomes: Counter[str] = field(default_factory=Counter)
    waits: list[float] = field(default_factory=list)
    """Seconds from asking to the decision, of each call approved or rejected."""
    grants_used: int = 0
    """Calls a grant approved, without a card."""
    edits: int = 0

    @property
    def median(self) -> float | None:
        return statistics.median(self.waits) if self.waits else None

    @property
    def p90(self) -> float | None:
        """The nearest-rank 90th percentile: 90 % of the decisions came this fast or faster."""
        if not self.waits:
            return None
        ranked = sorted(self.waits)
        return ranked[math.ceil(0.9 * len(ranked)) - 1]


@dataclass(kw_only=True)
class ChannelStats:
    tools: dict[str, ToolStats] = field(default_factory=dict)
    deciders: Counter[str] = field(default_factory=Counter)
    """Per person: the calls they approved (counted towards the outcome) or rejected."""
    quick: Counter[str] = field(default_factory=Counter)
    """Per person: their quick approvals."""

    def tool(self, name: str) -> ToolStats:
        return self.tools.setdefault(name, ToolStats())

    def add(self, call: PastCall, quick_seconds: float) -> None:
        if call.was == "granted":
            self.tool(call.tool).grants_used += 1
            return
        if call.was in ("auto_approved", "auto_rejected", "always"):
            return  # nobody was asked
        tool = self.tool(call.tool)
        tool.asked += 1
        tool.outcomes[call.was] += 1
        if call.was in TIMED and call.decided_at is not None:
            tool.waits.append(max(0.0, call.decided_at - call.at))
            self.deciders.update(call.decided_by)
        for person, at in call.approved_at.items():
            if at - call.at <= quick_seconds:
                self.quick[person] += 1


async def decision_stats(
    entries: AsyncIterator[AuditEntry], *, quick_seconds: float, channel: str | None = None
) -> dict[str, ChannelStats]:
    """Per channel (only `channel`, when given), how the decisions of `entries` went."""
    found: dict[str, ChannelStats] = {}

    def of(where: str) -> ChannelStats:
        return found.setdefault(where, ChannelStats())

    async def edits_counted() -> AsyncIterator[AuditEntry]:
        async for entry in entries:
            where = entry.channel or ""
            if entry.event == AuditEvent.EDITED and channel in (None, where):
                of(where).tool(str(entry.details.get("tool", ""))).edits += 1
            yield entry

    async for call in past_calls(edits_counted()):
        if channel in (None, call.channel):
            of(call.channel).add(call, quick_seconds)
    return found


def duration(seconds: float | None) -> str:
    """`4.2s`, `3m 05s`, `2h 10m`, `3d 4h`; `-` for none."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600}h"


HEADINGS = ("tool", "asked", *OUTCOMES, "median", "p90", "grants used", "edits")


def tool_table(stats: ChannelStats) -> list[str]:
    """Per tool, most asked first, as lines of a fixed-width table."""
    rows: list[tuple[str, ...]] = [HEADINGS]
    ranked = sorted(stats.tools.items(), key=lambda item: (-item[1].asked, item[0]))
    for name, tool in ranked:
        counts = [str(tool.outcomes[outcome]) for outcome in OUTCOMES]
        timing = [duration(tool.median), duration(tool.p90)]
        rows.append(
            (name, str(tool.asked), *counts, *timing, str(tool.grants_used), str(tool.edits))
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADINGS))]
    return [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def most(counts: Counter[str], limit: int | None = MOST_DECIDERS) -> list[tuple[str, int]]:
    """The people counted most (at most `limit`), then by id for a stable order."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:limit]


def people_line(counts: Iterable[tuple[str, int]], names: Mapping[str, str]) -> str:
    return ", ".join(f"{names.get(p, p)} {count}" for p, count in counts) or "nobody"


def principals(found: Mapping[str, ChannelStats]) -> set[str]:
    """The channels and people `text` names, to look their names up first."""
    return {
        *found,
        *(person for stats in found.values() for person in (*stats.deciders, *stats.quick)),
    }


def text(
    channel: str, stats: ChannelStats, quick_seconds: float, names: Mapping[str, str] | None = None
) -> str:
    """One channel's figures as `python -m runtime stats` prints them; `names` (from
    `runtime.review.names`): `#ops`, `@alice` where known, else the ids."""
    known = names or {}
    title = known.get(channel, channel) if channel else "(none)"
    lines = [f"Channel {title}:", *("  " + line for line in tool_table(stats))]
    lines.append(f"  decided most: {people_line(most(stats.deciders), known)}")
    quick = f"quick approvals (within {quick_seconds:g}s)"
    lines.append(f"  {quick}: {people_line(most(stats.quick, None), known)}")
    return "\n".join(lines)
