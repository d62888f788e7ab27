"""Finding our signal among the SDK's wrappers (`runtime.process.causes`)."""

from __future__ import annotations

from agents.exceptions import UserError

from runtime.process.causes import caused_by
from runtime.record.leases import Fenced


def test_a_ring_of_causes_is_walked_once() -> None:
    """A tool raised `Fenced`, the SDK raised its `UserError` from it, and a handler raised the
    `Fenced` again from that: asked for a kind that is not there, the walk ends."""
    fenced = Fenced("r1")
    wrapper = UserError("Error running tool translate")
    wrapper.__cause__ = fenced
    fenced.__cause__ = wrapper
    assert caused_by(wrapper, Fenced) is fenced
    assert caused_by(fenced, KeyError) is None
