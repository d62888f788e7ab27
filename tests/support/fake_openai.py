"""A fake OpenAI Responses endpoint on 127.0.0.1, scripted by the test.

The real `openai` client and the real Agents SDK talk to it; only the model is pretend. A
script is a function of the request that returns output items (or a `ModelError`).
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


Reply = list[Item] | ModelError
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

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/responses", self._responses)
        self._runner, url = await serve(app)
        self.url = f"{url}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _responses(self, request: web.Request) -> web.Response:
        model_request = ModelRequest(await request.json(), request.headers.get("Authorization", ""))
        self.requests.append(model_request)
        if self.delay:
            await asyncio.sleep(self.delay)
        reply = self.script(model_request)
        if not isinstance(reply, list | ModelError):
            reply = await reply
        if isinstance(reply, ModelError):
            error = {"error": {"message": reply.message, "type": "server_error", "code": None}}
            return web.json_response(error, status=reply.status)
        return web.json_response(_response(model_request.body.get("model", "fake"), reply))


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
