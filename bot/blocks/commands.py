"""Block Kit for `/agent`'s own answers: "Did you mean …?" with **Run as a task**."""

from __future__ import annotations

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement, SectionBlock

from bot.words import commands as command_words

ACTION_RUN_AS_TASK = "run_as_task"


def did_you_mean_blocks(text: str, offer: str) -> list[Block]:
    """`offer`: the button's value, what the click starts (`bot.slack.payloads.TaskOffer`)."""
    button = ButtonElement(
        text=command_words.RUN_AS_TASK, action_id=ACTION_RUN_AS_TASK, value=offer
    )
    return [SectionBlock(text=text), ActionsBlock(elements=[button])]
