"""What an MCP server adds to a tool call, against a function tool doing the same thing.

    .venv/bin/python -m bench.mcp_roundtrip [--calls 300]

Both run `list_tables` of the example database (`runtime/examples/db_server.py`): once as a
function tool in the worker's process, once on the MCP server over stdio, as the worker runs
it (`MCPServerStdio`, tools list cached). Measured, alternating so drift hits both:
- one call through the SDK's tool invoker (what runs after an approval);
- one whole run of two model turns (call the tool, answer) on an instant scripted model, which
  also lists the agent's tools on each turn;
- the probe a start or resume makes first (one `tools/list` round trip per server);
- connecting the server (once per worker, at start).
The tool journal and Redis are left out: they cost the same for both kinds of tool.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, function_tool
from agents.mcp import MCPServerStdio
from agents.testing import ModelStep, ScriptedModel, assistant_message
from agents.testing import function_call as model_function_call
from agents.tool_context import ToolContext

from bench.harness import header, report
from runtime.examples import db_server

SERVER_SCRIPT = Path(db_server.__file__)


@function_tool(name_override="list_tables")
async def list_tables_here() -> str:
    """List the database's tables with their row counts."""
    # Async, so the SDK runs it without a thread hop: the cheapest baseline there is.
    return db_server.list_tables()


def two_turns() -> ScriptedModel:
    return ScriptedModel(
        [
            ModelStep(output=[model_function_call("list_tables", {}, call_id="c1")]),
            ModelStep(output=[assistant_message("done")]),
        ]
    )


async def tool_of(agent: Agent[Any]) -> FunctionTool:
    tools = await agent.get_all_tools(RunContextWrapper(context={}))
    [tool] = [t for t in tools if isinstance(t, FunctionTool) and t.name == "list_tables"]
    return tool


async def invoke(tool: FunctionTool, number: int) -> float:
    context: ToolContext[dict[str, Any]] = ToolContext(
        context={}, tool_name=tool.name, tool_call_id=f"c{number}", tool_arguments="{}"
    )
    started = time.perf_counter()
    await tool.on_invoke_tool(context, "{}")
    return (time.perf_counter() - started) * 1000


async def whole_run(agent: Agent[Any], config: RunConfig) -> float:
    started = time.perf_counter()
    result = await Runner.run(agent.clone(model=two_turns()), "list the tables", run_config=config)
    assert result.final_output == "done"
    return (time.perf_counter() - started) * 1000


async def probe(server: MCPServerStdio) -> float:
    assert server.session is not None
    started = time.perf_counter()
    await server.session.list_tools()
    return (time.perf_counter() - started) * 1000


async def measure(calls: int) -> None:
    server = MCPServerStdio(
        params={"command": sys.executable, "args": [str(SERVER_SCRIPT)]},
        name="db",
        cache_tools_list=True,
    )
    started = time.perf_counter()
    await server.connect()  # type: ignore[no-untyped-call]
    connect_ms = (time.perf_counter() - started) * 1000
    try:
        here = Agent[Any](name="here", tools=[list_tables_here])
        remote = Agent[Any](name="remote", mcp_servers=[server])
        here_tool, remote_tool = await tool_of(here), await tool_of(remote)
        config = RunConfig(tracing_disabled=True)
        for _ in range(20):  # warm up both paths
            await invoke(here_tool, 0)
            await invoke(remote_tool, 0)
        names = ("fn", "mcp", "fn_run", "mcp_run", "probe")
        figures: dict[str, list[float]] = {name: [] for name in names}
        for number in range(calls):
            figures["fn"].append(await invoke(here_tool, number))
            figures["mcp"].append(await invoke(remote_tool, number))
            figures["fn_run"].append(await whole_run(here, config))
            figures["mcp_run"].append(await whole_run(remote, config))
            figures["probe"].append(await probe(server))
    finally:
        await server.cleanup()  # type: ignore[no-untyped-call]

    report("tool call: function tool", figures["fn"])
    report("tool call: MCP over stdio", figures["mcp"])
    report("run of two turns: function tool", figures["fn_run"])
    report("run of two turns: MCP over stdio", figures["mcp_run"])
    report("probe before a start or resume", figures["probe"])
    added_call = statistics.median(figures["mcp"]) - statistics.median(figures["fn"])
    added_run = statistics.median(figures["mcp_run"]) - statistics.median(figures["fn_run"])
    print(f"{'added by MCP, per call (p50)':<40} {added_call:9.2f} ms", flush=True)
    print(f"{'added by MCP, per run of two turns (p50)':<40} {added_run:9.2f} ms", flush=True)
    print(f"{'connecting the server (once per worker)':<40} {connect_ms:9.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    header(
        "MCP round trip vs function tool",
        f".venv/bin/python -m bench.mcp_roundtrip --calls {args.calls}",
    )
    asyncio.run(measure(args.calls))


if __name__ == "__main__":
    main()
