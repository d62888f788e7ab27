"""What a decision may carry beyond yes or no: a grant made with it, a grant that covered the
call, or arguments a person edited before approving.

Stored inside decisions (`runtime.record.envelope.Decision`) and per call, and written by the
decision
script (`runtime/record/lua/choices.lua`), so every field here is plain JSON that Lua reads too.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GRANT_ID_PATTERN = r"^g[0-9a-f]{10}$"

GrantScope = Literal["tool", "arguments"]
"""`tool`: later calls of this tool by this agent in this channel; `arguments`: only those with
the same call digest (the same arguments)."""


class GrantRef(BaseModel):
    """A grant as a decision names it: made with this approval, or the one that covered a call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=GRANT_ID_PATTERN)
    scope: GrantScope
    ends_at: float
    user_id: str | None = None
    """Who granted it."""
    user_name: str | None = None


class ArgumentEdit(BaseModel):
    """Arguments a person changed before approving: what runs instead of what the model sent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arguments: str
    """Exactly as the editor submitted them (JSON): the tool receives this text."""
    digest: str
    """`call_digest(tool, arguments, mcp_server)`: what the approval binds."""
    previous_digest: str
    """The digest the editor saw (the model's call, or an earlier edit)."""
    user_id: str
    user_name: str | None = None
    at: float
