"""The digest that binds an approval to exactly the call that was shown.

SHA-256 of the canonical JSON of the tool name and its arguments (parsed, so that whitespace
and key order do not matter; kept as a string when the model sent something that is not JSON).
"""

from __future__ import annotations

import hashlib
import json


def call_digest(tool: str, arguments: str) -> str:
    try:
        parsed: object = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    canonical = json.dumps(
        {"tool": tool, "arguments": parsed},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
