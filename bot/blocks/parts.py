"""Block Kit parts every card, menu and view here is made of: `slack_sdk`'s models, handed to the
Slack clients as they are. The Web API client, the `response_url` client and Bolt's `ack` turn a
model into JSON with its `to_dict()`, which first runs its validation (lengths, counts, styles),
so what Slack would refuse for those reasons fails in the sending process, before it leaves.

A text given as a `str` becomes a `plain_text` object with `"emoji": true` in slack_sdk; these
parts make their text objects themselves and send none.
"""

from __future__ import annotations

from slack_sdk.models.blocks import (
    Block,
    BlockElement,
    ButtonElement,
    ContextBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

__all__ = ["Block", "button", "context_block", "mrkdwn", "plain", "section"]


def mrkdwn(text: str) -> MarkdownTextObject:
    return MarkdownTextObject(text=text)


def plain(text: str, limit: int | None = None) -> PlainTextObject:
    """`text`, cut to `limit` characters when given (a modal's title holds 24)."""
    return PlainTextObject(text=text if limit is None else text[:limit])


def section(
    text: str, *, block_id: str | None = None, accessory: BlockElement | None = None
) -> SectionBlock:
    return SectionBlock(block_id=block_id, text=mrkdwn(text), accessory=accessory)


def context_block(text: str) -> ContextBlock:
    return ContextBlock(elements=[mrkdwn(text)])


def button(action_id: str, text: str, value: str, style: str | None = None) -> ButtonElement:
    return ButtonElement(text=plain(text), action_id=action_id, value=value, style=style)
