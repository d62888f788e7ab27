"""Agents with MCP servers, for the tests.

`REGISTRY`: `ops` uses the stdio server `db` (tests/support/mcp_server.py), which the worker
starts; its
`require_approval` asks for `drop_table`. `reports` shares the same server object (connected
once) and sees only `list_tables` through the server's tool filter. `HOSTED`: an agent with a
hosted MCP tool that OpenAI would run (the fake model plays OpenAI's approval requests).
`ASKING`: `support` uses the stdio server `desk` (tests/support/asking_server.py), whose tools
ask a person mid-call; they need no approval (the policy may add one).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from agents import Agent, HostedMCPTool
from agents.mcp import MCPServerStdio, ToolFilterContext

from tests.support.agents import delete_user


def _only_reads_for_reports(context: ToolFilterContext, tool: Any) -> bool:
    return context.agent.name != "reports" or tool.name == "list_tables"


db = MCPServerStdio(
    params={
        "command": sys.executable,
        "args": [str(Path(__file__).with_name("mcp_server.py"))],
        # The SDK passes only a few safe variables to the server; the ledger is ours to add.
        "env": {"COUNTERSIGN_TEST_LEDGER": os.environ.get("COUNTERSIGN_TEST_LEDGER", "")},
    },
    name="db",
    require_approval={"always": {"tool_names": ["drop_table"]}},
    cache_tools_list=True,
    tool_filter=_only_reads_for_reports,
)

ops = Agent[Any](
    name="ops", instructions="You manage users and tables.", tools=[delete_user], mcp_servers=[db]
)
reports = Agent[Any](name="reports", instructions="You report.", mcp_servers=[db])

REGISTRY = [ops, reports]

wiki = HostedMCPTool(
    tool_config={
        "type": "mcp",
        "server_label": "wiki",
        "server_url": "https://wiki.example.com/mcp",
        "require_approval": "always",
    }
)
HOSTED = [Agent[Any](name="researcher", instructions="You research.", tools=[wiki])]

desk = MCPServerStdio(
    params={
        "command": sys.executable,
        "args": [str(Path(__file__).with_name("asking_server.py"))],
        "env": {"COUNTERSIGN_TEST_LEDGER": os.environ.get("COUNTERSIGN_TEST_LEDGER", "")},
    },
    name="desk",
    cache_tools_list=True,
    # Shorter than a person takes to answer: a call that asks must outlast it.
    client_session_timeout_seconds=4,
)
ASKING = [Agent[Any](name="support", instructions="You refund orders.", mcp_servers=[desk])]

EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
everything = MCPServerStdio(
    params={"command": "npx", "args": ["-y", EVERYTHING_PACKAGE, "stdio"]},
    name="everything",
    cache_tools_list=True,
    client_session_timeout_seconds=60,
)
EVERYTHING = [Agent[Any](name="tester", instructions="You test.", mcp_servers=[everything])]
"""`tester` uses MCP's reference server from npm (started by `npx`, fetched on first use)."""
