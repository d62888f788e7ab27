"""A model call of a run whose text people watch, asked as a stream: its text deltas go to the
stretch's `runtime.runs.model_text.ModelText` as they come, and the call still returns one
`ModelResponse`, built from the `response.completed` event as the SDK builds it (the usage,
`response_id`, `request_id` and raw usage of `OpenAIResponsesModel.get_response`, the output
items of the event, or those of each `response.output_item.done` when a backend leaves the
event's output empty, as the SDK's streamed runs do).

Why inside `Model.get_response`, rather than running the round with `Runner.run_streamed`:
- The journal stays as it is (`runtime.models.journaled`): a response is journaled and replayed
  at the one place a model call returns, so a retried job sees the call ids it saw before and
  nothing runs twice; `Runner.run`, its interruptions and its hooks are untouched.
- A stream that fails before `response.completed` is retried as any failed call is
  (`runtime.models.retries`: the runner retries `get_response`); `Runner.run_streamed` retries
  no stream once a text delta was produced. The text the failed attempt showed is withdrawn
  (`ModelText.began`), so the retry's does not follow it.
- Only the run's own calls stream: an agent tool's inner run (`runtime.record.turns.inside_a_call`)
  is asked as before, and so is every call when nobody watches (`STREAMING=off`, a thread that
  fell back to its status message).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents import Model, ModelSettings
from agents.exceptions import ModelBehaviorError
from agents.items import ModelResponse
from agents.usage import (
    Usage,
    _extract_raw_usage_snapshot,
    _requests_for_response_without_usage,
    _response_usage_to_usage,
)
from openai.types.responses import Response, ResponseOutputMessage, ResponseOutputText

from runtime.runs.model_text import ModelText

TEXT_DELTA = "response.output_text.delta"
FAILED = frozenset({"response.failed", "response.incomplete", "error", "response.error"})


async def streamed_response(
    model: Model,
    text: ModelText,
    arguments: tuple[Any, ...],
    model_settings: ModelSettings,
    options: dict[str, Any],
) -> ModelResponse:
    """`model.stream_response(*arguments, **options)` as one `ModelResponse`; its text told to
    `text` as it comes. `model_settings`: the call's (it is among `arguments`)."""
    text.began()
    answered = False
    try:
        response = await _completed(model, text, arguments, options)
        answered = True
    except NotImplementedError:  # a model of the user's that cannot stream: asked as before
        text.ended(answered=False)
        return await model.get_response(*arguments, **options)
    finally:
        text.ended(answered=answered)
    return ModelResponse(
        output=response.output,
        usage=_usage(response),
        response_id=response.id,
        request_id=getattr(response, "_request_id", None),
        raw_usage=(
            _extract_raw_usage_snapshot(response)
            if model_settings.preserve_raw_usage is True
            else None
        ),
    )


async def _completed(
    model: Model, text: ModelText, arguments: tuple[Any, ...], options: dict[str, Any]
) -> Response:
    final: Response | None = None
    done: list[Any] = []
    async for event in model.stream_response(*arguments, **options):
        kind = getattr(event, "type", None)
        if kind == TEXT_DELTA:
            text.delta(str(getattr(event, "delta", "")))
        elif kind == "response.output_item.done":
            done.append(event.item)  # type: ignore[union-attr]
        elif kind == "response.completed":
            final = event.response  # type: ignore[union-attr]
        elif kind in FAILED:
            # The OpenAI model raises its own error first; another model may only say so.
            raise ModelBehaviorError(f"the model's stream ended with {kind}")
    if final is None:
        raise ModelBehaviorError("Model did not produce a final response!")
    if not final.output and done:
        final.output = done
    return final


def response_text(output: Sequence[Any]) -> str:
    """The text of a response's messages, as its deltas would have made it."""
    return "".join(
        part.text
        for item in output
        if isinstance(item, ResponseOutputMessage)
        for part in item.content
        if isinstance(part, ResponseOutputText)
    )


def _usage(response: Response) -> Usage:
    if response.usage is not None:
        return _response_usage_to_usage(response.usage)
    return Usage(requests=_requests_for_response_without_usage(response))
