"""An MCP server's form as a modal: one input per property of its flat schema, the values
typed by the schema and checked by the edit modal's check."""

from __future__ import annotations

from typing import Any

from bot.blocks.questions import QuestionRef, form_modal, form_values
from runtime.mcp import Question

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "amount": {"type": "integer", "title": "Amount", "minimum": 1},
        "reason": {"type": "string"},
        "notify": {"type": "boolean", "default": True},
        "rate": {"type": "number"},
        "speed": {"type": "string", "oneOf": [{"const": "s", "title": "Standard"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    },
    "required": ["amount", "reason"],
}


def question() -> Question:
    return Question(
        question_id="r0123456789abcdef.q1",
        run_id="r0123456789abcdef",
        call_id="c1",
        tool="refund",
        agent="ops",
        server="desk",
        mode="form",
        message="How much?",
        requested_schema=SCHEMA,
        requester="UALICE",
        channel="C1",
    )


def state(**inputs: dict[str, Any]) -> dict[str, Any]:
    return {"values": {block: {"value": value} for block, value in inputs.items()}}


def test_each_property_is_an_input_of_its_kind_and_only_required_ones_are_required() -> None:
    ref = QuestionRef(run_id="r0123456789abcdef", question_id="r0123456789abcdef.q1")
    modal = form_modal(question(), ref)
    assert modal is not None and modal.notify_on_close, "closing it answers cancel"
    inputs = [b.to_dict() for b in modal.blocks if b.type == "input"]
    kinds = [i["element"]["type"] for i in inputs]
    assert kinds == [
        "number_input",
        "plain_text_input",
        "static_select",
        "number_input",
        "static_select",
        "multi_static_select",
    ]
    assert [i.get("optional", False) for i in inputs] == [False, False, True, True, True, True]
    assert inputs[0]["element"]["is_decimal_allowed"] is False
    assert inputs[2]["element"]["initial_option"]["value"] == "true"


def test_values_are_typed_by_the_schema() -> None:
    values, errors = form_values(
        state(
            field_0={"type": "number_input", "value": "12"},
            field_1={"type": "plain_text_input", "value": "damaged"},
            field_2={"type": "static_select", "selected_option": {"value": "false"}},
            field_3={"type": "number_input", "value": "2.5"},
            field_5={"type": "multi_static_select", "selected_options": [{"value": "b"}]},
        ),
        SCHEMA,
    )
    assert errors == {}
    assert values == {
        "amount": 12,
        "reason": "damaged",
        "notify": False,
        "rate": 2.5,
        "tags": ["b"],
    }


def test_a_value_the_schema_refuses_is_shown_next_to_its_field_and_a_missing_one_too() -> None:
    _, errors = form_values(state(field_0={"type": "number_input", "value": "1.5"}), SCHEMA)
    assert errors == {"field_0": "Write a whole number, such as 3."}
    _, errors = form_values(
        state(
            field_0={"type": "number_input", "value": "0"},
            field_1={"type": "plain_text_input", "value": "x"},
        ),
        SCHEMA,
    )
    assert list(errors) == ["field_0"] and "amount" in errors["field_0"]
    _, errors = form_values(state(field_0={"type": "number_input", "value": "3"}), SCHEMA)
    assert "reason is missing" in next(iter(errors.values()))
