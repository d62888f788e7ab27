"""Our signals from inside a shell, local shell or apply_patch call, carried past the SDK.

The SDK runs those tools' executors and editors inside `except Exception`, and turns whatever
they raise into the call's output ("failed") for the model to read: an `OutcomeLost` would reach
the model as text (and the run go on without asking the person whether to run it again), and a
`Fenced` or `Stopped` delivery would carry on past its fence or its stop. Function tools'
exceptions reach the runner (`runtime.stops.safe_point.caused_by`); these are raised as a
`BaseException` instead, which the SDK lets through, and turned back at `run_until_stopped`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from runtime.record.leases import Fenced
from runtime.record.starts import OutcomeLost
from runtime.record.stop_mark import Stopped

_T = TypeVar("_T")


class PastTheSdk(BaseException):
    """Carries `signal` out of the SDK's tool action; never escapes `run_until_stopped`."""

    def __init__(self, signal: Exception) -> None:
        super().__init__(str(signal))
        self.signal = signal


async def past_the_sdk(call: Awaitable[_T]) -> _T:
    """`await call`, our signals raised so that the SDK cannot take them for the tool's error."""
    try:
        return await call
    except (OutcomeLost, Fenced, Stopped) as signal:
        raise PastTheSdk(signal) from signal
