"""Model scripts shared by many tests."""

from __future__ import annotations

from tests.support.fake_openai import Item, ModelRequest, message, tool_call


def delete_then_answer(request: ModelRequest) -> list[Item]:
    """Ask to delete u-100 (call id `call_del`); once told the outcome, answer `done: <it>`."""
    if not request.tool_outputs:
        return [tool_call("delete_user", {"user_id": "u-100"}, "call_del")]
    return [message("done: " + request.tool_outputs["call_del"])]
