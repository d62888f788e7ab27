"""One deadline for a process's whole shutdown, shared out between its stages.

Heroku sends SIGKILL 30 s after SIGTERM. A process stops in stages (the web: requests in flight,
then Slack updates; the worker: running jobs, then cancelling the rest and handing them back),
and fixed waits per stage add up past 30 s. Instead each stage takes what is left of one budget,
keeping back what the stages after it need, so the whole never runs past the deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(kw_only=True)
class ShutdownBudget:
    seconds: float
    """The whole shutdown, from the first stop signal (`SHUTDOWN_GRACE_SECONDS`)."""
    _deadline: float | None = None

    def start(self) -> None:
        """The clock starts at the first stop; later calls keep that deadline."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self.seconds

    def taken(self) -> float:
        """Seconds since the first stop (0 before it): what the process logs as it ends."""
        if self._deadline is None:
            return 0.0
        return self.seconds - (self._deadline - time.monotonic())

    def left(self, *, keep: float = 0.0) -> float:
        """Seconds this stage may take: what is left, less `keep` for the stages after it."""
        self.start()
        assert self._deadline is not None
        return max(0.0, self._deadline - keep - time.monotonic())
