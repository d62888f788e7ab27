"""MCP sessions that can be asked: the SDK's server classes, given an elicitation callback.

The SDK's MCP server classes (stdio, SSE, streamable HTTP: `_MCPServerWithClientSession`) build
their `mcp.Client` without an `elicitation_callback`, so a server's `elicitation/create` is
refused ("Elicitation not supported") and the session does not even announce the capability.
Their one seam is `_client_session_context`, the context that opens a session (for `connect`,
and for the isolated session the SDK retries a call on). `let_ask` puts ours on a server
object: the SDK's own steps (the client run in a task of its own, so that `connect` and
`cleanup` may be awaited from different tasks), with the callback.

A session's read timeout (the SDK's `client_session_timeout_seconds`, 5 s by default) bounds
each request, also a `tools/call` whose server waits for a person's answer: the session's
`call_tool` gets the question's wait on top (`wait_seconds`), its other requests keep theirs.

The session is opened with MCP's handshake (`mode="legacy"`): on that protocol a server asks
with an `elicitation/create` request while its tool runs. On the 2026-07-28 protocol, which
`mode="auto"` would pick with a server that offers it, a server cannot send requests over
stdio at all (the SDK's Python servers' `ctx.elicit` fails there), and asks with an
input-required result instead, which the SDK's `call_tool` refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import Any, cast

import mcp
from agents.mcp import MCPServer
from agents.mcp.server import _MCPServerWithClientSession
from mcp.client.session import ClientSession, ElicitationFnT

HANDSHAKE = "legacy"


def let_ask(server: MCPServer, callback: ElicitationFnT, *, wait_seconds: float) -> bool:
    """Give `server`'s sessions `callback`, their calls `wait_seconds` more to answer; False
    for a server class that builds no session (its questions are refused, as by the SDK)."""
    if not isinstance(server, _MCPServerWithClientSession) or not hasattr(mcp, "Client"):
        return False
    # An attribute of the instance: the SDK calls `self._client_session_context(...)`.
    opening = partial(_session, server, callback, wait_seconds)
    object.__setattr__(server, "_client_session_context", opening)
    return True


def _patient(session: ClientSession, read_timeout: float | None, wait_seconds: float) -> None:
    """The session's `tools/call`s wait `wait_seconds` longer than its other requests: their
    server may be waiting for a person's answer meanwhile."""
    if read_timeout is None:
        return  # no timeout: nothing to lengthen
    call_tool = session.call_tool
    longer = read_timeout + wait_seconds

    async def patient_call(
        name: str, arguments: Any = None, read_timeout_seconds: float | None = None, **rest: Any
    ) -> Any:
        timeout = read_timeout_seconds if read_timeout_seconds is not None else longer
        return await call_tool(name, arguments, timeout, **rest)

    object.__setattr__(session, "call_tool", patient_call)


@contextlib.asynccontextmanager
async def _session(
    server: _MCPServerWithClientSession,
    callback: ElicitationFnT,
    wait_seconds: float,
    read_timeout: Any,
) -> AsyncIterator[ClientSession]:
    ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
    close = asyncio.Event()

    async def run_client() -> None:
        try:
            client = mcp.Client(
                cast(Any, server.create_streams()),
                mode=HANDSHAKE,
                cache=None,
                read_timeout_seconds=read_timeout,
                message_handler=server.message_handler,
                elicitation_callback=callback,
            )
            async with client as connected:
                _patient(connected.session, read_timeout, wait_seconds)
                ready.set_result(connected.session)
                await close.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
                return
            raise

    task = asyncio.create_task(run_client(), name=f"mcp-session:{server.name}")
    try:
        try:
            session = await asyncio.shield(ready)
        except asyncio.CancelledError:
            ready.cancel()
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
        except BaseException:
            await task
            raise
        yield session
    finally:
        close.set()
        try:
            await task
        except asyncio.CancelledError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
