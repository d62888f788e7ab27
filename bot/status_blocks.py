"""The run's status message: its text, and a **Stop** button while the run is alive."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import ActionsBlock, ButtonElement, SectionBlock

from bot import messages

ACTION_STOP = "stop_run"
ALIVE_STATES = frozenset({"working", "waiting"})


def status_blocks(run_id: str, text: str, state: str) -> list[dict[str, Any]]:
    blocks: list[Any] = [SectionBlock(text=text)]
    if state in ALIVE_STATES:
        stop = ButtonElement(
            text=messages.STOP, action_id=ACTION_STOP, value=run_id, style="danger"
        )
        blocks.append(ActionsBlock(elements=[stop]))
    return [block.to_dict() for block in blocks]
