"""Start marks: a tool call is marked as started, with its round, before the tool runs.

A call with a recorded outcome never runs again (`runtime.journal.invoker`). A call with a start
mark and no outcome was cut off inside its tool (a worker killed, a job timed out, Redis away
for longer than the job), so it may have had its effect: it does not run again on a retry
unless a person says so on a "may have run" card (`runtime.runs.lost_outcomes`), or its tool
declared itself safe to repeat (`runtime.tools.safe_to_repeat`).

The mark holds the round of the run in which the call started. A person's "Run again" opens a
later round: a mark of an earlier round is theirs to override, a mark of the current round is
a start of the call they allowed, and is asked about again.

Field `started:<call id>` of the run's hash (`runtime.record.layout.STARTED`), written fenced:
a delivery that lost its run cannot mark, so runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.record import layout as rr
from runtime.record import scripts as rs
from runtime.record.turns import turn_fields


class OutcomeLost(Exception):
    """A call started in an earlier attempt and has no recorded outcome: it may have run."""

    def __init__(self, run_id: str, call_id: str, tool: str) -> None:
        super().__init__(f"run {run_id}: {tool} ({call_id}) may have run; its result was lost")
        self.run_id = run_id
        self.call_id = call_id
        self.tool = tool


Begun = tuple[str, bytes | None]
"""What `CallStarts.begin` found: ('recorded', outcome), ('missing', None), ('fenced', None),
('stopped', the stop mark), ('stopping', None), ('lost', None) or ('marked', None): the tool
may run."""


class CallStarts:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._keys = keys
        self._set = rs.run_once(redis, rs.FENCED_WRITE, keeps=False)
        self._start = rs.run_once(redis, rs.START)

    async def begin(
        self,
        run_id: str,
        fence: int,
        call_id: str,
        round_: int,
        *,
        run_again: bool,
        repeats: bool,
        stopping: bool,
        turns: Mapping[str, str] | None = None,
        held: bool = False,
    ) -> Begun:
        """The call's journal entry read and, if it may run, its mark written (with the model
        `turns` not journaled yet), in one step (`runtime/record/lua/start.lua`), checked in
        the order of `RunStore.journal_read`. `held`: this worker remembers the call's output
        (`CallMemory.holds_output`): if the hash has none, ('missing', None), nothing marked."""
        reply = await self._start(
            rs.Start(
                run=self._keys.run(run_id),
                fence=fence,
                call_id=call_id,
                round=round_,
                run_again="1" if run_again else "",
                repeats="1" if repeats else "",
                stopping="1" if stopping else "",
                held="1" if held else "",
                turns=turn_fields(turns) if turns else [],
            )
        )
        status = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        return status, (reply[1] if len(reply) > 1 else None)

    async def not_running(self, run_id: str, fence: int, call_id: str) -> None:
        """Take the mark back: the tool did not start after all, or it raised (it returned):
        only a call cut off inside its tool has lost its outcome."""
        await self._set(self._write(run_id, fence, call_id, ""))

    def _write(self, run_id: str, fence: int, call_id: str, round_: str) -> rs.FencedSet:
        return rs.FencedSet(
            run=self._keys.run(run_id),
            audit=self._keys.shard_of(run_id).audit,
            fence=str(fence),
            entry="",
            fields=[rr.STARTED + call_id, round_],
        )


SAFE_TO_REPEAT = "countersign_safe_to_repeat"
"""Set (true) on a tool's invoker by `runtime.tools.safe_to_repeat`: a call cut off inside it
runs again on a retry without asking."""


def may_repeat(invoker: object) -> bool:
    return getattr(invoker, SAFE_TO_REPEAT, False) is True
