"""The model every run of the worker talks to, journaled: whichever model the settings choose.

`journaled_run_config` wraps the run config's model provider (the SDK's default OpenAI one, the
scripted model of the demo, a test's fake) and a `Model` it names; `install_journal` wraps a
`Model` an agent holds itself. An agent used as a tool runs its inner run with the outer run's
config, so its model calls are journaled too, and so are a hand-off's.

Each call of `JournaledModel.get_response` inside a run (`runtime.journal.invoker.current_scope`):
1. replays the response journaled for the same request of the same round, if there is one
   (`runtime.record.turns`): a retried job sees the call ids it saw before;
2. otherwise asks the model, whose call the runner retries on a 429 or 5xx
   (`runtime.models.retries`); as a stream when people watch the run's text
   (`runtime.models.streamed`), which a replayed response shows too;
3. refuses a response with a function call whose arguments pass the digest's bounds
   (`runtime.calls.digest`: the SDK parses arguments before any approval and a 1,500-deep
   array ends in a `RecursionError` there): the run ends, the thread says why, nothing runs;
4. journals a response that asks for tool calls, fenced, before the SDK acts on it.

A call of `stream_response` (an agent tool with `on_stream`) passes through unjournaled: the
executor runs `Runner.run`, which asks for none.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from agents import Model, ModelProvider, ModelRetrySettings, ModelSettings, RunConfig
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import ModelTracing
from agents.models.multi_provider import MultiProvider
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest
from agents.tool import Tool
from openai.types.responses.response_prompt_param import ResponsePromptParam

from runtime.calls.digest import ArgumentsTooLarge, check_arguments
from runtime.failures import RunFailed
from runtime.journal.invoker import carried_out
from runtime.journal.scope import JournalScope, current_scope
from runtime.models.streamed import response_text, streamed_response
from runtime.record.turns import (
    Request,
    UnreadableTurn,
    asks_for_tools,
    dump_turn,
    inside_a_call,
    load_turn,
    turn_key,
)
from runtime.reporter import Failure
from runtime.runs.model_text import ModelText, current_text

log = logging.getLogger(__name__)


class JournaledModel(Model):
    """`inner`, with its turns journaled and replayed; what the SDK asks of a model besides
    (`get_retry_advice`, a prompt cache's hints) is `inner`'s."""

    def __init__(self, inner: Model) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self._inner, name)

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        return self._inner.get_retry_advice(request)

    async def close(self) -> None:
        await self._inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self._inner._cleanup_on_run_end(owner)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        text = None if inside_a_call() else current_text()

        async def ask() -> ModelResponse:
            arguments = (
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
            )
            options: dict[str, Any] = {
                "previous_response_id": previous_response_id,
                "conversation_id": conversation_id,
                "prompt": prompt,
            }
            if text is None:
                response = await self._inner.get_response(*arguments, **options)
            else:
                response = await streamed_response(
                    self._inner, text, arguments, model_settings, options
                )
            _refuse_oversized(response)
            return response

        scope = current_scope()
        if scope is None:
            return await ask()
        request = Request(
            instructions=system_instructions,
            input=input,
            tools=[getattr(tool, "name", type(tool).__name__) for tool in tools],
            handoffs=[handoff.tool_name for handoff in handoffs],
            output_schema=output_schema.name() if output_schema is not None else None,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=dict(prompt) if prompt is not None else None,
        )
        return await _journaled(scope, request, ask, text)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        return self._inner.stream_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )


async def _journaled(
    scope: JournalScope,
    request: Request,
    ask: Callable[[], Awaitable[ModelResponse]],
    text: ModelText | None,
) -> ModelResponse:
    run_id, turns = scope.lease.run_id, scope.store.turns
    digest = request.digest(scope.round)
    number = scope.turns.take(digest)
    key = turn_key(scope.round, digest, number)
    try:
        known = scope.journaled
        # Only a delivery that held the run before this one can have journaled the turn, and
        # what it journaled was read with the run after this delivery's claim.
        recorded = await turns.recorded(run_id, key) if known is None or key in known else None
        if recorded is not None:
            log.info("run %s: a model turn already answered is replayed (%s)", run_id, key)
            replayed = load_turn(recorded)
            if text is not None:  # shown as it was when first answered, all at once
                text.began()
                text.delta(response_text(replayed.output))
                text.ended(answered=True)
            return replayed
        response = await ask()
        if asks_for_tools(response):
            # Journaled with the first write that comes before anything acts on it (a tool's
            # start mark, a call decided without a person), or never, if the run only waits.
            scope.turns.pending[key] = dump_turn(response)
    except UnreadableTurn as error:
        raise carried_out(RunFailed(Failure.UNREADABLE_STATE, str(error))) from error
    except BaseException:
        scope.turns.give_back(digest, number)  # the SDK's retry of this request keeps its key
        raise
    return response


def _refuse_oversized(response: ModelResponse) -> None:
    """Raise `RunFailed` (and carry it out of an agent tool) for a function call whose
    arguments no digest can bind, before the SDK parses them."""
    for item in response.output:
        if getattr(item, "type", None) != "function_call":
            continue
        try:
            check_arguments(str(getattr(item, "arguments", "")))
        except ArgumentsTooLarge as error:
            reason = str(error).rstrip(".")
            detail = f"`{getattr(item, 'name', '?')}`: {reason[:1].lower()}{reason[1:]}"
            raise carried_out(RunFailed(Failure.ARGUMENTS_REFUSED, detail)) from error


class JournaledModelProvider(ModelProvider):
    """Each model `inner` provides, journaled."""

    def __init__(self, inner: ModelProvider) -> None:
        self._inner = inner

    def get_model(self, model_name: str | None) -> Model:
        return journaled_model(self._inner.get_model(model_name))

    async def aclose(self) -> None:
        await self._inner.aclose()


def journaled_model(model: Model) -> Model:
    return model if isinstance(model, JournaledModel) else JournaledModel(model)


def journaled_run_config(
    run_config: RunConfig | None, retry: ModelRetrySettings | None
) -> RunConfig:
    """`run_config` (None: the SDK's default, OpenAI) with its models journaled and the
    runner's retries of a model call (`runtime.models.retries`; None: none) under any
    settings it has."""
    config = run_config or RunConfig(model_provider=MultiProvider())
    provider = config.model_provider
    if not isinstance(provider, JournaledModelProvider):
        provider = JournaledModelProvider(provider)
    model = journaled_model(config.model) if isinstance(config.model, Model) else config.model
    settings = config.model_settings
    if retry is not None:
        settings = ModelSettings(retry=retry).resolve(settings)
    return dataclasses.replace(
        config, model_provider=provider, model=model, model_settings=settings
    )
