"""A process's settings, read from its environment once: the base each process's `Settings`
is built from (`runtime.settings.RuntimeSettings` for the worker and the CLI,
`bot.settings.Settings` for the web).

pydantic-settings reads the variables with its own environment source: a field's variable is its
name in any case (`approval_ttl_seconds` is `APPROVAL_TTL_SECONDS`), and an empty value counts as
unset. Each field declares with `setting()` what to tell the operator when its value is missing
or refused, and `problems()` says it, one line per variable at fault.

Tests pass a mapping instead of the process's environment (`from_environ`), read by the same
source, so they need no monkeypatching and nothing of the machine's environment leaks in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import Field, ValidationError
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

CANNOT_START = "Countersign cannot start: its configuration is incomplete or invalid."


def setting(default: Any = PydanticUndefined, *, fix: str, **constraints: Any) -> Any:
    """A variable's field: its default and constraints, as `pydantic.Field` takes them, and
    `fix`, what to tell the operator when its value is missing or refused."""
    return Field(default, json_schema_extra={"fix": fix}, **constraints)


class EnvironSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading `environ` instead of `os.environ`."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.env_vars = parse_env_vars(
            environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class EnvironSettings(BaseSettings):
    """Read from the environment (or a mapping given), frozen once read."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", env_ignore_empty=True)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The settings `environ` gives (tests pass a mapping); None: the process's own."""
        if environ is None:
            return cls()
        # BaseSettings takes its sources ready-made; type checkers see only the fields as
        # arguments (pydantic's dataclass transform).
        return cls(_build_sources=((EnvironSource(cls, environ),), {}))  # type: ignore[call-arg]

    @classmethod
    def fix(cls, variable: str) -> str:
        """What to tell the operator about `variable` (e.g. `SLACK_BOT_TOKEN`); empty if
        nothing."""
        field = cls.model_fields.get(variable.lower())
        extra = field.json_schema_extra if field is not None else None
        return str(extra.get("fix", "")) if isinstance(extra, dict) else ""

    @classmethod
    def problems(cls, error: ValidationError) -> list[str]:
        """One line per variable at fault: what is wrong with it and how to fix it."""
        lines = []
        for problem in error.errors():
            variable = str(problem["loc"][0]).upper() if problem["loc"] else "?"
            reason = _reason(problem["type"], problem["msg"])
            lines.append(f"{variable} {reason}. {cls.fix(variable)}".rstrip())
        return lines

    @classmethod
    def described(cls, error: ValidationError) -> str:
        """The operator's message for settings refused at start: one line per problem."""
        return "\n".join([CANNOT_START, *(f"  - {problem}" for problem in cls.problems(error))])


def _reason(kind: str, message: str) -> str:
    if kind == "missing":
        return "is not set"
    if kind == "string_pattern_mismatch":
        # A regular expression tells the operator nothing: the fix says what the value looks like.
        return "is invalid (not in the form it takes)"
    return f"is invalid ({message})"
