"""MCP's reference server asks (`@modelcontextprotocol/server-everything` from npm, started by
`npx` as its README says): its `trigger-elicitation-request` tool, which the server offers only
to a client that announces elicitation, asks with a form of every field kind MCP allows.
Skipped, saying why, where `npx` is missing or npm's registry does not answer."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.runtime.mcp.test_mcp_questions import answer_of, asked, open_form
from tests.support.deployment import Deployment
from tests.support.mcp_agents import EVERYTHING_PACKAGE


def _unavailable() -> str | None:
    if shutil.which("npx") is None:
        return "npx is not installed (Node.js): MCP's reference server cannot be started"
    try:
        subprocess.run(
            ["npm", "view", EVERYTHING_PACKAGE, "version"],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return f"npm's registry does not answer for {EVERYTHING_PACKAGE}"
    return None


pytestmark = pytest.mark.skipif(bool(_unavailable()), reason=_unavailable() or "")

EVERYTHING = {"AGENTS": "tests.support.mcp_agents:EVERYTHING", "MCP_PROBE_SECONDS": "1"}


async def test_the_reference_servers_form_is_answered(deployment: Deployment) -> None:
    root, question = await asked(deployment, "trigger-elicitation-request", {}, agents=EVERYTHING)
    assert "Please provide inputs for the following fields" in question.all_text()
    view = await open_form(deployment, question, "UALICE")
    kinds = [b["element"]["type"] for b in view["blocks"] if b["type"] == "input"]
    assert {"plain_text_input", "static_select", "number_input", "multi_static_select"} <= set(
        kinds
    )
    name = {"field_0": {"value": {"type": "plain_text_input", "value": "Ada Lovelace"}}}
    status, _ = await deployment.sender.submit_view(view, user="UALICE", values=name)
    assert status == 200
    said = await answer_of(deployment, root)
    assert "User provided the requested information" in said and "Name: Ada Lovelace" in said
