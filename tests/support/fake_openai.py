"""A fake OpenAI Responses endpoint on 127.0.0.1, scripted by the test.

The real `openai` client and the real Agents SDK talk to it; only the model is pretend. A
script is a function of the request that returns output items (or a `ModelError`, or a
`StreamCut`).

A request with `stream: true` is answered as the Responses API answers it: server-sent events
(`event: <type>` and `data: <json>`), `response.created`, `response.in_progress`, then for each
output item `response.output_item.added`, its text as `response.output_text.delta`s of
`DELTA_CHARS` characters (`pace` seconds apart) or its arguments as
`response.function_call_arguments.delta`, the `.done` events, `response.output_item.done`, and
`response.completed` with the whole response.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.support.local_server import serve

Item = dict[str, Any]


@dataclass(frozen=True)
class ModelError:
    status: int
    message: str = "fake model error"


@dataclass(frozen=True)
class StreamCut:
    """A streamed answer whose connection breaks after `after` characters of its text (a
    network error to the client, which the runner retries); a request that does not stream
    gets a 502."""

    output: list[Item]
    after: int = 10


DELTA_CHARS = 8
Reply = list[Item] | ModelError | StreamCut
Script = Callable[["ModelRequest"], Reply | Awaitable[Reply]]


@dataclass(frozen=True)
class ModelRequest:
    body: dict[str, Any]
    authorization: str = ""

    @property
    def input(self) -> list[Item]:
        value = self.body.get("input", [])
        return [{"role": "user", "content": value}] if isinstance(value, str) else list(value)

    @property
    def task(self) -> str:
        """The first user message: the task the run was started with."""
        for item in self.input:
            if item.get("role") == "user":
                content = item.get("content")
                return content if isinstance(content, str) else json.dumps(content)
        return ""

    @property
    def tool_outputs(self) -> dict[str, str]:
        """call id -> what the model was told the tool returned (or why it did not run)."""
        return {
            item["call_id"]: str(item.get("output"))
            for item in self.input
            if item.get("type") in TOOL_OUTPUT_TYPES
        }

    @property
    def tools(self) -> list[str]:
        return [tool.get("name", "") for tool in self.body.get("tools", [])]


_ids = itertools.count(1)
TOOL_OUTPUT_TYPES = (
    "function_call_output",
    "shell_call_output",
    "local_shell_call_output",
    "apply_patch_call_output",
    "custom_tool_call_output",
)


def shell_call(commands: list[str], call_id: str, *, timeout_ms: int | None = None) -> Item:
    """A call of the SDK's `ShellTool` (the Responses API's `shell` tool)."""
    return {
        "type": "shell_call",
        "id": f"sh_{next(_ids)}",
        "call_id": call_id,
        "action": {"commands": commands, "timeout_ms": timeout_ms, "max_output_length": None},
        "status": "completed",
    }


def local_shell_call(command: list[str], call_id: str) -> Item:
    """A call of the SDK's `LocalShellTool` (the Responses API's `local_shell` tool)."""
    return {
        "type": "local_shell_call",
        "id": f"ls_{next(_ids)}",
        "call_id": call_id,
        "action": {"type": "exec", "command": command, "env": {}},
        "status": "completed",
    }


def custom_tool_call(name: str, text: str, call_id: str) -> Item:
    """A call of a `CustomTool`: raw text, not JSON arguments."""
    return {
        "type": "custom_tool_call",
        "id": f"ct_{next(_ids)}",
        "call_id": call_id,
        "name": name,
        "input": text,
    }


def apply_patch_call(operation: dict[str, str], call_id: str) -> Item:
    """A call of the SDK's `ApplyPatchTool`: one operation (`type`, `path`, `diff`)."""
    return {
        "type": "apply_patch_call",
        "id": f"ap_{next(_ids)}",
        "call_id": call_id,
        "operation": operation,
        "status": "completed",
    }


def tool_call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> Item:
    number = next(_ids)
    return {
        "type": "function_call",
        "id": f"fc_{number}",
        "call_id": call_id or f"call_{number}",
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


def message(text: str) -> Item:
    return {
        "type": "message",
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


class FakeOpenAI:
    def __init__(self, script: Script | None = None) -> None:
        self.script: Script = script or (lambda request: [message("ok")])
        self.requests: list[ModelRequest] = []
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.delay = 0.0
        self.pace = 0.0
        """Seconds between two streamed events of text: a model that writes as it thinks."""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/responses", self._responses)
        self._runner, url = await serve(app)
        self.url = f"{url}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def streamed(self) -> list[ModelRequest]:
        """The requests that asked for a stream."""
        return [r for r in self.requests if r.body.get("stream")]

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        model_request = ModelRequest(await request.json(), request.headers.get("Authorization", ""))
        self.requests.append(model_request)
        if self.delay:
            await asyncio.sleep(self.delay)
        reply = self.script(model_request)
        if not isinstance(reply, list | ModelError | StreamCut):
            reply = await reply
        if isinstance(reply, ModelError) or (
            isinstance(reply, StreamCut) and not model_request.body.get("stream")
        ):
            status, message = (
                (reply.status, reply.message)
                if isinstance(reply, ModelError)
                else (
                    502,
                    "fake model error",
                )
            )
            error = {"error": {"message": message, "type": "server_error", "code": None}}
            return web.json_response(error, status=status)
        model = model_request.body.get("model", "fake")
        if model_request.body.get("stream"):
            return await self._stream(request, model, reply)
        assert isinstance(reply, list)
        return web.json_response(
            _response(model, reply), headers={"x-request-id": f"req_{next(_ids)}"}
        )

    async def _stream(
        self, request: web.Request, model: str, reply: list[Item] | StreamCut
    ) -> web.StreamResponse:
        cut = reply.after if isinstance(reply, StreamCut) else None
        output = reply.output if isinstance(reply, StreamCut) else reply
        answer = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "x-request-id": f"req_{next(_ids)}"}
        )
        await answer.prepare(request)
        written = 0
        for event in stream_events(_response(model, output)):
            if event["type"] == "response.output_text.delta":
                if cut is not None and written >= cut:
                    assert request.transport is not None
                    request.transport.abort()  # the connection breaks mid-answer
                    return answer
                written += len(event["delta"])
                if self.pace:
                    await asyncio.sleep(self.pace)
            data = json.dumps(event)
            await answer.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
        await answer.write_eof()
        return answer


def _response(model: str, output: list[Item]) -> dict[str, Any]:
    return {
        "id": f"resp_{next(_ids)}",
        "object": "response",
        "created_at": time.time(),
        "status": "completed",
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def stream_events(response: dict[str, Any]) -> list[Item]:
    """`response` as the Responses API streams it (without the sequence numbers' gaps)."""
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[Item] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(response["output"]):
        events += _item_events(index, item)
    events.append({"type": "response.completed", "response": response})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def _item_events(index: int, item: Item) -> list[Item]:
    where = {"item_id": item.get("id", ""), "output_index": index}
    if item["type"] == "message":
        added = {**item, "status": "in_progress", "content": []}
        events: list[Item] = [
            {"type": "response.output_item.added", "output_index": index, "item": added}
        ]
        for number, part in enumerate(item["content"]):
            at = {**where, "content_index": number}
            text = part.get("text", "")
            events.append(
                {"type": "response.content_part.added", **at, "part": {**part, "text": ""}}
            )
            for start in range(0, len(text), DELTA_CHARS):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        **at,
                        "delta": text[start : start + DELTA_CHARS],
                        "logprobs": [],
                    }
                )
            events.append({"type": "response.output_text.done", **at, "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", **at, "part": part})
    elif item["type"] == "function_call":
        added = {**item, "status": "in_progress", "arguments": ""}
        events = [
            {"type": "response.output_item.added", "output_index": index, "item": added},
            {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
            {
                "type": "response.function_call_arguments.done",
                **where,
                "arguments": item["arguments"],
                "name": item.get("name"),
            },
        ]
    else:
        events = [{"type": "response.output_item.added", "output_index": index, "item": item}]
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events
