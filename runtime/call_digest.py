"""The digest that binds an approval to exactly the call that was shown.

SHA-256 of the canonical JSON of the tool name and its arguments (parsed, so that whitespace
and key order do not matter; kept as a string when the model sent something that is not JSON).
A call of a tool from an MCP server also covers the server's name, so an approval of
`drop_table` on `db-staging` does not cover `drop_table` on `db-prod`; a function tool's
digest has no server key and is unchanged.
"""

from __future__ import annotations

import hashlib
import json


def call_digest(tool: str, arguments: str, server: str | None = None) -> str:
    try:
        parsed: object = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    content: dict[str, object] = {"tool": tool, "arguments": parsed}
    if server is not None:
        content["mcp_server"] = server
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
