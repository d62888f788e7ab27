"""Agents whose tools declare previews, for the preview tests: one that works, one that fails,
one that is slow; and a tool with a synchronous preview that hangs for good when asked about a
`hung-*` project. (Tools of their own: a preview attaches to its tool object.)"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from agents import Agent, function_tool

from runtime.calls.previews import preview
from tests.support.agents import EXECUTIONS


@function_tool(needs_approval=True)
async def delete_user(user_id: str) -> str:
    """Delete a user."""
    EXECUTIONS.append(("delete_user", {"user_id": user_id}))
    return f"deleted {user_id}"


@preview(delete_user)
async def preview_delete_user(user_id: str) -> str:
    if user_id == "u-broken":
        raise LookupError("the directory is down")
    if user_id == "u-slow":
        await asyncio.sleep(30)
    return f"Would delete {user_id} (Ada Lovelace) and 3 projects."


PREVIEWED: list[str] = []
"""The projects whose archive preview was called (in this process)."""


@function_tool(needs_approval=True)
def archive_project(project: str) -> str:
    """Archive a project (a synchronous tool: the SDK runs it on asyncio's default executor)."""
    EXECUTIONS.append(("archive_project", {"project": project}))
    return f"archived {project}"


@preview(archive_project)
def preview_archive_project(project: str) -> str:
    PREVIEWED.append(project)
    if project.startswith("hung-"):
        threading.Event().wait()  # as a preview stuck on a host that never answers
    return f"Would archive {project} and its 12 documents."


ops = Agent[Any](name="ops", instructions="You manage users.", tools=[delete_user, archive_project])

REGISTRY = [ops]
