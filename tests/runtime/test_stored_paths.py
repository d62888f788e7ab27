"""What names a module path outside the code keeps working when modules move between packages.

Module paths are not a public API, and no record in Redis names one of ours (the run envelope,
the gate and the SDK's `RunState` name agents and tools, not modules). Two things outside the
code do name one, and both outlive a deploy: a deployment's `AGENTS` setting (`module:attribute`,
loaded by `runtime.registry`) and a tool module's imports (`runtime.tools`, the one module tool
authors import). Both are checked here in a fresh interpreter, as a worker starting on a
deployment configured before the move would load them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STORED_AGENTS = "runtime.examples:AGENTS"
"""The `AGENTS` value a deployment kept from before (the default: `runtime.settings`)."""

OLD_TOOL_MODULE = """
from agents import function_tool
from runtime.tools import idempotency_key, preview, safe_to_repeat

@safe_to_repeat
@function_tool(needs_approval=True)
def restart(service: str) -> str:
    return f"restarted {service} ({idempotency_key()})"

@preview(restart)
def preview_restart(service: str) -> str:
    return f"would restart {service}"
"""


def run_fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_stored_agents_setting_still_loads_its_registry() -> None:
    names = run_fresh(
        "from runtime.registry import load_registry; "
        f"print(','.join(load_registry({STORED_AGENTS!r}).names))"
    )
    assert names.split(",") == ["ops", "billing", "shell"]


def test_the_default_agents_setting_is_the_stored_one() -> None:
    from runtime.settings import RuntimeSettings

    assert RuntimeSettings.model_fields["agents"].default == STORED_AGENTS


def test_a_tool_module_written_before_still_imports() -> None:
    assert run_fresh(OLD_TOOL_MODULE + "\nprint(restart.name)") == "restart"
