"""Block Kit for an MCP server's question: its message (**Answer** and **Decline** for a form,
the link with **Done** and **Decline** for a URL), how it ended, and the form's modal.

MCP's forms are flat: each property a string (perhaps one of an enum), a number, an integer, a
boolean, or an array of an enum's values. Each becomes one input of the modal, in the schema's
order (block `field_<n>`): a menu for an enum and for a boolean, a menu of several for an array,
a number input, a text input. The values read back are
typed by the schema, then checked against it by the edit modal's own check
(`runtime.decisions.parse_edit`), so a form accepts what an edited call would.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field
from slack_sdk.models.blocks import (
    ActionsBlock,
    InputBlock,
    NumberInputElement,
    Option,
    PlainTextInputElement,
    StaticMultiSelectElement,
    StaticSelectElement,
)
from slack_sdk.models.views import View

from bot.blocks.parts import Block, button, context_block, plain, section
from bot.slack.payloads import MESSAGE_TS, SLACK_ID, _Payload
from bot.words import questions as words
from runtime.decisions import InvalidEdit, parse_edit
from runtime.jobs import RUN_ID_PATTERN
from runtime.mcp import QUESTION_ID_PATTERN, Question, StoredQuestion

ACTION_ANSWER = "question_answer"
ACTION_DECLINE = "question_decline"
ACTION_DONE = "question_done"
FORM_CALLBACK = "question_form"
QUESTION_BLOCK = "question"
"""The section that says what a server asks: how a question's message is told from others."""
FIELD_ACTION = "value"
MAX_FIELDS = 50
"""Slack's most blocks in a modal, less the context line: a longer form cannot be shown."""


class QuestionRef(_Payload):
    """What a question's buttons and its modal carry: which question, and where it was shown."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    question_id: str = Field(pattern=QUESTION_ID_PATTERN)
    channel: str | None = Field(default=None, pattern=SLACK_ID)
    message_ts: str | None = Field(default=None, pattern=MESSAGE_TS)

    def value(self) -> str:
        return f"{self.run_id} {self.question_id}"

    @classmethod
    def parse(cls, value: str) -> QuestionRef:
        run_id, _, question_id = value.partition(" ")
        return cls(run_id=run_id, question_id=question_id)


def question_blocks(question: Question, deadline: float, *, copy: bool = False) -> list[Block]:
    """The open question, with its buttons."""
    url = question.mode == "url"
    text = words.asked(
        question.server, question.tool, question.requester, question.message, url=url
    )
    blocks: list[Block] = [section(text, block_id=QUESTION_BLOCK)]
    if url and question.url:
        blocks.append(section(words.link_line(question.url)))
    value = QuestionRef(run_id=question.run_id, question_id=question.question_id).value()
    first = button(
        ACTION_DONE if url else ACTION_ANSWER, words.DONE if url else words.ANSWER, value, "primary"
    )
    blocks.append(ActionsBlock(elements=[first, button(ACTION_DECLINE, words.DECLINE, value)]))
    lines = [words.who_answers(question.responders, question.requester, deadline)]
    if copy:
        lines.append(words.copy_of(question.channel))
    blocks.append(context_block("\n".join(lines)))
    return blocks


def settled_blocks(stored: StoredQuestion) -> list[Block]:
    """The question once answered (or cancelled): no buttons."""
    question = stored.question
    url = question.mode == "url"
    text = words.asked(
        question.server, question.tool, question.requester, question.message, url=url
    )
    settled = context_block(words.settled(stored.state, stored.by))
    return [section(text, block_id=QUESTION_BLOCK), settled]


def form_modal(question: Question, ref: QuestionRef) -> View | None:
    """The form as a modal; None when its schema cannot be drawn as one (then only Decline)."""
    fields = _properties(question.requested_schema)
    if fields is None or len(fields) > MAX_FIELDS:
        return None
    required = set((question.requested_schema or {}).get("required") or ())
    blocks: list[Block] = [context_block(words.form_context(question.server, question.message))]
    for n, (name, spec) in enumerate(fields):
        label = str(spec.get("title") or name)
        hint = spec.get("description")
        blocks.append(
            InputBlock(
                block_id=f"field_{n}",
                label=plain(label, 2000),
                element=_element(spec),
                optional=name not in required,
                hint=plain(str(hint), 2000) if hint else None,
            )
        )
    return View(
        type="modal",
        callback_id=FORM_CALLBACK,
        private_metadata=ref.model_dump_json(),
        title=plain(words.FORM_TITLE, 24),
        submit=plain(words.FORM_SUBMIT, 24),
        close=plain(words.FORM_CANCEL, 24),
        notify_on_close=True,
        blocks=blocks,
    )


def _properties(schema: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]] | None:
    properties = (schema or {}).get("properties")
    if not isinstance(properties, dict):
        return None
    found = [(str(k), v) for k, v in properties.items() if isinstance(v, dict)]
    return found if len(found) == len(properties) else None


def _choices(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """An enum's values and their titles (`enum` with `enumNames`, or `oneOf` of `const`)."""
    if isinstance(spec.get("enum"), list):
        names = spec.get("enumNames") or []
        return [
            (str(v), str(names[i]) if i < len(names) else str(v))
            for i, v in enumerate(spec["enum"])
        ]
    one_of = spec.get("oneOf") or spec.get("anyOf") or []
    return [
        (str(o["const"]), str(o.get("title") or o["const"]))
        for o in one_of
        if isinstance(o, dict) and "const" in o
    ]


def _element(spec: dict[str, Any]) -> Any:
    kind, default = spec.get("type"), spec.get("default")
    items = spec.get("items")
    if kind == "array" and isinstance(items, dict) and (choices := _choices(items)):
        options = [Option(value=v[:150], text=t[:75]) for v, t in choices]
        chosen = [o for o in options if isinstance(default, list) and o.value in map(str, default)]
        return StaticMultiSelectElement(
            action_id=FIELD_ACTION,
            options=options,
            initial_options=chosen or None,
            max_selected_items=spec.get("maxItems")
            if isinstance(spec.get("maxItems"), int)
            else None,
        )
    if kind == "boolean":
        options = [Option(value="true", text=words.YES), Option(value="false", text=words.NO)]
        initial = None if default is None else options[0 if default else 1]
        return StaticSelectElement(action_id=FIELD_ACTION, options=options, initial_option=initial)
    if kind in ("number", "integer"):
        return NumberInputElement(
            action_id=FIELD_ACTION,
            is_decimal_allowed=kind == "number",
            initial_value=None if default is None else str(default),
            min_value=None if spec.get("minimum") is None else str(spec["minimum"]),
            max_value=None if spec.get("maximum") is None else str(spec["maximum"]),
        )
    if choices := _choices(spec):
        options = [Option(value=v[:150], text=t[:75]) for v, t in choices]
        initial = next(
            (o for o in options if default is not None and o.value == str(default)), None
        )
        return StaticSelectElement(action_id=FIELD_ACTION, options=options, initial_option=initial)
    return PlainTextInputElement(
        action_id=FIELD_ACTION,
        initial_value=None if default is None else str(default),
        max_length=spec.get("maxLength") if isinstance(spec.get("maxLength"), int) else None,
    )


def form_values(
    state: dict[str, Any], schema: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The values submitted, typed by `schema`, and the problems by block (none: valid, as
    the edit modal's check has it)."""
    fields = _properties(schema) or []
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    found = state.get("values")
    submitted: dict[str, Any] = found if isinstance(found, dict) else {}
    for n, (name, spec) in enumerate(fields):
        block = f"field_{n}"
        inputs = submitted.get(block)
        raw = _raw(inputs.get(FIELD_ACTION) if isinstance(inputs, dict) else None)
        if raw is None or raw == "":
            continue
        try:
            values[name] = _typed(raw, spec)
        except ValueError as problem:
            errors[block] = str(problem)
    if errors:
        return values, errors
    try:
        parse_edit(json.dumps(values), schema)
    except InvalidEdit as problem:
        block = next(
            (f"field_{n}" for n, (name, _) in enumerate(fields) if str(problem).startswith(name)),
            "field_0",
        )
        errors[block] = str(problem)[:1000]
    return values, errors


def _raw(element: Any) -> str | list[str] | None:
    if not isinstance(element, dict):
        return None
    several = element.get("selected_options")
    if isinstance(several, list):
        chosen = [o.get("value") for o in several if isinstance(o, dict)]
        return [v for v in chosen if isinstance(v, str)] or None
    selected = element.get("selected_option")
    if isinstance(selected, dict):
        value = selected.get("value")
        return value if isinstance(value, str) else None
    value = element.get("value")
    return value if isinstance(value, str) else None


def _typed(raw: str | list[str], spec: dict[str, Any]) -> Any:
    kind = spec.get("type")
    if isinstance(raw, list) or kind == "array":
        return raw if isinstance(raw, list) else [raw]
    if kind == "boolean":
        return raw == "true"
    if kind == "integer":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(words.NOT_A_WHOLE_NUMBER) from None
    if kind == "number":
        try:
            number = float(raw)
        except ValueError:
            raise ValueError(words.NOT_A_NUMBER) from None
        return int(number) if number.is_integer() and "." not in raw else number
    return raw
