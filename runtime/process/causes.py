"""Finding an error of a kind among an error's causes.

The SDK wraps what a tool invoker raises (a fence lost, a stop met, Redis away inside a tool) in
errors of its own; what they stand for is found by walking `__cause__`.
"""

from __future__ import annotations

from typing import TypeVar

_E = TypeVar("_E", bound=BaseException)


def caused_by(error: BaseException, kind: type[_E]) -> _E | None:
    """`error` itself or the first of its causes that is a `kind`, if any. Causes can form a
    ring (`raise cause from wrapper`, where the SDK's wrapper was raised from `cause`): each is
    looked at once."""
    seen: BaseException | None = error
    looked: set[int] = set()
    while seen is not None and id(seen) not in looked:
        if isinstance(seen, kind):
            return seen
        looked.add(id(seen))
        seen = seen.__cause__
    return None
