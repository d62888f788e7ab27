"""An aiohttp app served on 127.0.0.1 on a port the system picks: the fake Slack and OpenAI
servers, the harness's web process and the benchmarks' proxy."""

from __future__ import annotations

from aiohttp import web


async def serve(
    app: web.Application, *, shutdown_timeout: float = 1.0
) -> tuple[web.AppRunner, str]:
    """`app`, listening: its runner (the caller cleans it up) and its base URL,
    `http://127.0.0.1:PORT`. A fake waits `shutdown_timeout` for requests still in flight."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"
