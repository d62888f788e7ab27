"""What the audit trail keeps of a call's arguments (`AUDIT_ARGS`, `AUDIT_ARGS_MAX_BYTES`).

The `requested`, `auto_approved`, `auto_rejected` and `grant_used` entries keep the call's
arguments as the digest was computed from them (`runtime.calls.description`: the model's
arguments, or a shell or patch call's description), so that anyone can check the digest against
what was asked, and a backtest (`runtime.audit.backtest`) can replay a rule on them. An
`answered` entry keeps a person's answer (**Answer instead**) the same way, under `answer`,
`answer_omitted` and `answer_bytes`. Three cases, by the entry's fields:

- `arguments`: the text, whole;
- `arguments_omitted = "too_long"` and `arguments_bytes`: longer than `AUDIT_ARGS_MAX_BYTES`;
  the entry keeps the digest only;
- neither: `AUDIT_ARGS=off` (or an entry written before arguments were kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.settings import RuntimeSettings

TOO_LONG = "too_long"


@dataclass(frozen=True, kw_only=True, slots=True)
class KeptArguments:
    keep: bool = True
    """False (`AUDIT_ARGS=off`): no entry holds arguments, only their digest."""
    max_bytes: int = 8192

    @classmethod
    def of(cls, settings: RuntimeSettings) -> KeptArguments:
        """`AUDIT_ARGS` and `AUDIT_ARGS_MAX_BYTES`, as every process keeps them."""
        return cls(keep=settings.audit_args == "on", max_bytes=settings.audit_args_max_bytes)

    def fields(self, arguments: str, *, name: str = "arguments") -> dict[str, str | int]:
        """The fields an audit entry of a call with `arguments` gains (`name`: what the text
        is, e.g. `answer` for the text a person gave in a tool's place, kept the same way)."""
        if not self.keep:
            return {}
        size = len(arguments.encode())
        if size > self.max_bytes:
            return {f"{name}_omitted": TOO_LONG, f"{name}_bytes": size}
        return {name: arguments}


def kept_arguments(details: dict[str, Any]) -> str | None:
    """The arguments an entry kept; None when it kept none (too long, off, or older)."""
    arguments = details.get("arguments")
    return arguments if isinstance(arguments, str) else None


def why_not_kept(details: dict[str, Any]) -> str | None:
    """Why an entry holds no arguments, in words; None when it holds them."""
    if kept_arguments(details) is not None:
        return None
    if details.get("arguments_omitted") == TOO_LONG:
        return f"too long to keep ({details.get('arguments_bytes', '?')} bytes)"
    return "not in the trail (AUDIT_ARGS=off, or written before arguments were kept)"
