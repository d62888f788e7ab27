"""Agents whose tools declare previews, for the preview tests: one that works, one that fails,
one that is slow. (Tools of their own: a preview attaches to its tool object.)"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, function_tool

from runtime.previews import preview
from tests.agents import EXECUTIONS


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


ops = Agent[Any](name="ops", instructions="You manage users.", tools=[delete_user])

REGISTRY = [ops]
