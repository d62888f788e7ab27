"""What the store tells about the tool calls it records, to whoever remembers them.

A worker remembers the calls it ran lately (`runtime.failover.calls.RecentCalls`), so that a
failover that loses their start marks or outputs can have them written back to the new primary.
That memory lives above the record (it watches the primary); the store only needs these
verbs, so it takes the memory as this Protocol, and a store outside a worker gets `FORGETFUL`.
"""

from __future__ import annotations

from typing import Final, Protocol


class CallMemory(Protocol):
    def started(self, run_id: str, call_id: str, round_: int) -> None: ...

    def recorded(self, run_id: str, call_id: str, output: str, audit: str) -> None: ...

    def not_running(self, run_id: str, call_id: str) -> None: ...

    async def reuse(self, run_id: str, call_id: str) -> bytes | None:
        """The output remembered for a call whose journal entry a failover lost, if any."""
        ...

    def holds_output(self, run_id: str, call_id: str) -> bool:
        """Whether an output is remembered for the call (`reuse` would have one)."""
        ...


class _Forgetful:
    """Remembers nothing: a store outside a worker (the web process, a CLI command)."""

    def started(self, run_id: str, call_id: str, round_: int) -> None:
        pass

    def recorded(self, run_id: str, call_id: str, output: str, audit: str) -> None:
        pass

    def not_running(self, run_id: str, call_id: str) -> None:
        pass

    async def reuse(self, run_id: str, call_id: str) -> bytes | None:
        return None

    def holds_output(self, run_id: str, call_id: str) -> bool:
        return False


FORGETFUL: Final[CallMemory] = _Forgetful()
