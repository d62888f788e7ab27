"""The digest that binds an approval to exactly the call that was shown.

SHA-256 of the canonical JSON of the tool name and its arguments (parsed, so that whitespace
and key order do not matter; kept as a string when the model sent something that is not JSON).
A call of a tool from an MCP server also covers the server's name, so an approval of
`drop_table` on `db-staging` does not cover `drop_table` on `db-prod`; a function tool's
digest has no server key and is unchanged.

A shell, local shell or apply_patch call has no arguments of the model's: `arguments` is then
its description (`runtime.call_description`), and the digest also covers its `kind`, so that
two different commands never share a digest. Calls of other tools have no kind key: their
digests are byte for byte what they were before kinds existed, as stored approvals and grants
expect.
"""

from __future__ import annotations

import hashlib
import json


def call_digest(
    tool: str, arguments: str, server: str | None = None, *, kind: str | None = None
) -> str:
    try:
        parsed: object = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    content: dict[str, object] = {"tool": tool, "arguments": parsed}
    if server is not None:
        content["mcp_server"] = server
    if kind is not None:
        content["kind"] = kind
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
