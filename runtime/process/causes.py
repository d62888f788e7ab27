"""Finding an error of a kind among an error's causes.

The SDK wraps what a tool invoker raises (a fence lost, a stop met, Redis away inside a tool) in
errors of its own; what they stand for is found by walking `__cause__`.
"""

from __future__ import annotations

from typing import TypeVar

_E = TypeVar("_E", bound=BaseException)


def caused_by(error: BaseException, kind: type[_E]) -> _E | None:
    """`error` itself or the first of its causes that is a `kind`, if any."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__
    return None
