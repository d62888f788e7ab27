"""A `function_tool`'s arguments schema, as the Agents SDK converts them (`ArgumentSchema`).

Apart from `runtime.judging.arguments` because it reads the SDK: whatever only judges stored
calls (the backtest, `python -m runtime`) never loads it.
"""

from __future__ import annotations

from agents import FunctionTool
from agents._function_tool_arguments import can_prepare_without_user_code
from agents.function_schema import function_schema

from runtime.judging.arguments import ArgumentSchema


def function_tool_schema(tool: FunctionTool) -> ArgumentSchema:
    """A `function_tool`'s own model, rebuilt as the SDK built it (before the journal wraps
    its invoker: `FunctionTool.__wrapped__` is gone afterwards); else its JSON schema."""
    try:
        func = tool.__wrapped__
        built = function_schema(
            func,
            name_override=tool.name,
            use_docstring_info=False,
            strict_json_schema=tool.strict_json_schema,
        )
    except Exception:  # noqa: BLE001 -- not made by `function_tool`: its schema only
        return ArgumentSchema(json_schema=tool.params_json_schema)
    model = built.params_pydantic_model
    # The model the SDK runs must be the one its schema describes, and free of user code.
    same = set(built.params_json_schema.get("properties", {})) == set(
        tool.params_json_schema.get("properties", {})
    )
    if not same or not can_prepare_without_user_code(model):
        return ArgumentSchema(json_schema=tool.params_json_schema)
    return ArgumentSchema(model=model)
