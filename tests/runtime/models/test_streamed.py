"""A run's model call asked as a stream returns what `get_response` would have, its text told
as it came; a failed attempt's text is withdrawn; the scripted model writes a few words at a
time. The real `openai` client and the SDK's OpenAI model talk to the fake endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import ModelSettings, OpenAIResponsesModel
from agents.models.interface import ModelTracing
from openai import APIConnectionError, AsyncOpenAI

from runtime.models.scripted import ScriptedModelProvider
from runtime.models.streamed import streamed_response
from runtime.runs.model_text import ModelText
from tests.support.fake_openai import FakeOpenAI, ModelError, StreamCut, message, tool_call

ANSWER = "Deleted u-100. Nothing else was changed, and the audit trail has the details."


CLIENTS: list[AsyncOpenAI] = []


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAI]:
    output = [message(ANSWER), tool_call("list_users", {}, "call_1")]
    fake = FakeOpenAI(lambda request: output)
    await fake.start()
    yield fake
    while CLIENTS:
        await CLIENTS.pop().close()
    await fake.stop()


def responses_model(fake: FakeOpenAI) -> OpenAIResponsesModel:
    client = AsyncOpenAI(api_key="sk-test", base_url=fake.url, max_retries=0)
    CLIENTS.append(client)
    return OpenAIResponsesModel(model="gpt-test", openai_client=client)


ARGUMENTS: tuple[Any, ...] = (
    "be brief",
    "delete u-100",
    ModelSettings(),
    [],
    None,
    [],
    ModelTracing.DISABLED,
)
OPTIONS: dict[str, Any] = {"previous_response_id": None, "conversation_id": None, "prompt": None}


async def test_a_streamed_call_returns_what_get_response_returns(model: FakeOpenAI) -> None:
    openai = responses_model(model)
    whole = await openai.get_response(*ARGUMENTS, **OPTIONS)
    seen: list[str] = []
    text = ModelText(on_change=lambda: seen.append(text.shown))
    streamed = await streamed_response(openai, text, ARGUMENTS, ModelSettings(), OPTIONS)

    assert [r.body.get("stream") for r in model.requests] == [None, True]
    assert [i.model_dump() for i in streamed.output] == [i.model_dump() for i in whole.output]
    assert streamed.usage.requests == whole.usage.requests == 1
    assert (streamed.usage.input_tokens, streamed.usage.output_tokens) == (10, 5)
    assert streamed.response_id is not None and streamed.response_id.startswith("resp_")
    assert streamed.request_id is not None and streamed.request_id.startswith("req_")
    assert whole.request_id is not None and whole.request_id.startswith("req_")
    assert text.shown == ANSWER
    assert len(seen) == -(-len(ANSWER) // 8), "one change per delta, as it came"
    assert seen[0] == ANSWER[:8]


async def test_a_stream_cut_mid_answer_raises_and_its_text_is_withdrawn(
    model: FakeOpenAI,
) -> None:
    model.script = lambda request: StreamCut([message(ANSWER)], after=16)
    text = ModelText()
    with pytest.raises(APIConnectionError):  # which the runner retries (a network error)
        await streamed_response(responses_model(model), text, ARGUMENTS, ModelSettings(), OPTIONS)
    assert text.shown == "" and text.withdrawn == 1


async def test_an_error_before_the_stream_is_the_models_error(model: FakeOpenAI) -> None:
    model.script = lambda request: ModelError(503)
    text = ModelText()
    with pytest.raises(Exception, match=r"503|fake model error"):
        await streamed_response(responses_model(model), text, ARGUMENTS, ModelSettings(), OPTIONS)
    assert text.shown == ""


def test_each_answer_is_a_paragraph_and_a_failed_attempt_leaves_nothing() -> None:
    text = ModelText()
    text.began()
    text.delta("Looking the user up.")
    text.ended(answered=True)
    text.began()
    text.delta("Deleted")
    text.ended(answered=False)
    assert text.shown == "Looking the user up."
    text.began()
    text.delta("Deleted u-100.")
    text.ended(answered=True)
    assert text.shown == "Looking the user up.\n\nDeleted u-100."


async def test_the_scripted_model_writes_a_few_words_at_a_time() -> None:
    scripted = ScriptedModelProvider().get_model(None)
    deltas: list[str] = []
    text = ModelText(on_change=lambda: deltas.append(text.shown))
    response = await streamed_response(
        scripted, text, (None, "what is the weather?", *ARGUMENTS[2:]), ModelSettings(), OPTIONS
    )
    assert text.shown.startswith("Scripted model (no OPENAI_API_KEY set)")
    assert len(deltas) > 10, "written as it goes, not all at once"
    assert response.output[0].type == "message"


async def test_a_model_that_cannot_stream_is_asked_as_before(model: FakeOpenAI) -> None:
    class Unstreamed(OpenAIResponsesModel):
        def stream_response(self, *arguments: Any, **options: Any) -> Any:
            raise NotImplementedError

    client = AsyncOpenAI(api_key="sk-test", base_url=model.url, max_retries=0)
    CLIENTS.append(client)
    unstreamed = Unstreamed(model="gpt-test", openai_client=client)
    text = ModelText()
    response = await streamed_response(unstreamed, text, ARGUMENTS, ModelSettings(), OPTIONS)
    assert [r.body.get("stream") for r in model.requests] == [None]
    assert response.output[0].type == "message" and text.shown == ""
