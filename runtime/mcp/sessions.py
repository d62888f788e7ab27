"""MCP sessions that can be asked: the SDK's server classes, given an elicitation callback.

The SDK's MCP server classes (stdio, SSE, streamable HTTP: `_MCPServerWithClientSession`) build
their `mcp.Client` without an `elicitation_callback`, so a server's `elicitation/create` is
refused ("Elicitation not supported") and the session does not even announce the capability.
Their one seam is `_client_session_context`, the context that opens a session (for `connect`,
and for the isolated session the SDK retries a call on). `let_ask` puts ours on a server
object: the SDK's own steps (the client run in a task of its own, so that `connect` and
`cleanup` may be awaited from different tasks), with the callback.

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


def let_ask(server: MCPServer, callback: ElicitationFnT) -> bool:
    """Give `server`'s sessions `callback`; False for a server class that builds none (then
    its questions are refused, as by the SDK)."""
    if not isinstance(server, _MCPServerWithClientSession) or not hasattr(mcp, "Client"):
        return False
    # An attribute of the instance: the SDK calls `self._client_session_context(...)`.
    object.__setattr__(server, "_client_session_context", partial(_session, server, callback))
    return True


@contextlib.asynccontextmanager
async def _session(
    server: _MCPServerWithClientSession, callback: ElicitationFnT, read_timeout: Any
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
