"""Settings of the agent runtime, read from the environment once per process.

`bot.settings.Settings` extends these with the Slack credentials; the process entry points
build that one object and hand the runtime its part.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Field,
    FilePath,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from redis.asyncio.connection import parse_url

from runtime.process.logs import LogFormat

DEFAULT_CLUSTER_SHARDS = 16
"""Shards on a Redis Cluster when `REDIS_SHARDS` is not set (`runtime.db.keys` shards by it)."""

# What to tell the operator when a variable is missing or wrong, by variable name.
FIXES: dict[str, str] = {
    "REDIS_URL": "Set it to a Redis URL such as redis://localhost:6379/0 (rediss:// for TLS).",
    "REDIS_TLS_URL": "Set it to a rediss:// URL, or unset it to use REDIS_URL.",
    "REDIS_TLS_VERIFY": "Use true (check the rediss:// server's certificate, the default) or "
    "false (Heroku Redis, whose certificate is self-signed).",
    "REDIS_TLS_CA_FILE": "Give the path of a PEM file with the CA certificate(s) that signed "
    "your Redis server's certificate.",
    "REDIS_KEY_PREFIX": "Use a short prefix such as countersign: (letters, digits, : _ -).",
    "AGENTS": "Name the registry as module:attribute, e.g. runtime.examples:AGENTS.",
    "APPROVAL_TTL_SECONDS": "Use a whole number of seconds between 1 and 604800 (7 days).",
    "CONVERSATION_TTL_SECONDS": "Use a whole number of seconds between 60 and 7776000 (90 days).",
    "CONVERSATION_MAX_ITEMS": "Use a whole number of history items between 2 and 5000.",
    "WORKER_CONCURRENCY": "Use a whole number of concurrent runs per worker between 1 and 256.",
    "MAX_TURNS": "Use a whole number of model turns per run between 1 and 100.",
    "JOB_MAX_DELIVERIES": "Use a whole number of attempts between 1 and 20.",
    "MODEL_RETRIES": "Use a whole number of retries of a model call inside the run, from 0 "
    "(none: the job is retried instead) to 20.",
    "JOB_IDLE_TIMEOUT_SECONDS": "Use a number of seconds between 0.5 and 3600.",
    "JOB_TIMEOUT_SECONDS": "Use a number of seconds between 1 and 86400 (a day).",
    "APPROVERS": "List Slack user ids and user-group ids, comma-separated, not names: a user "
    "id is U or W and capital letters and digits (U024BE7LH; in Slack, a person's profile, More, "
    "Copy member ID), a group's is S and the same (S0614TZR7).",
    "ALLOW_SELF_APPROVAL": "Use true or false.",
    "ADMINS": "List the Slack user ids and user-group ids who may stop any run, comma-separated, "
    "not names: a user id is U or W and capital letters and digits (U024BE7LH), a group's is S "
    "and the same (S0614TZR7).",
    "EXTERNAL_DECIDERS": "Use deny (the default: only full members of the installing workspace "
    "or its enterprise decide) or allow (Slack Connect users and guests may decide too).",
    "EXTERNAL_REQUESTERS": "Use deny (the default: only full members of the installing "
    "workspace or its enterprise start runs) or allow (Slack Connect users and guests may start "
    "runs too; no grant, Approve always or automatic approval covers their calls).",
    "POLICY_FILE": "Give the path of a TOML policy file, relative to the working directory.",
    "REMINDER_AT": "Use fractions of the approval's lifetime from 0 (no reminder) to 0.99, "
    "comma-separated: 0.5,0.9 reminds at half time and near the end.",
    "AUDIT_RETENTION_DAYS": "Use a whole number of days between 1 and 3650.",
    "QUICK_APPROVAL_SECONDS": "Use a number of seconds between 0 and 3600: an approval given "
    "this soon after the card appeared counts as quick in `/agent stats` and the metrics.",
    "AUDIT_ARGS": "Use on (the default: the trail keeps each call's arguments) or off (digests "
    "only).",
    "AUDIT_ARGS_MAX_BYTES": "Use a whole number of bytes between 0 and 1048576 (1 MiB); longer "
    "arguments are not kept, only their digest.",
    "WORKER_NICENESS": "Use a whole number from 0 (no change) to 19 (yield the most).",
    "SHUTDOWN_GRACE_SECONDS": "Use seconds between 0 and 3600 for the whole stop after SIGTERM "
    "(Heroku kills 30 s after it).",
    "METRICS_PORT": "Use a free TCP port (1-65535) for the worker's /metrics, or unset it.",
    "GRANT_MAX_SECONDS": "Use a whole number of seconds from 0 (no grants) to 604800 (7 days).",
    "LOG_FORMAT": "Use text (the default) or json (one JSON object per line, for log drains).",
    "REDIS_MIN_REPLICAS": "Use a whole number of replicas from 0 (do not wait, the default) to 5 "
    "that must confirm each decision and job before it is acknowledged.",
    "REDIS_WAIT_MS": "Use milliseconds between 1 and 2000 to wait for the replicas (clicks must be "
    "answered within Slack's 3 s).",
    "REDIS_SENTINELS": "List Sentinel addresses as host:port, comma-separated, e.g. "
    "10.0.0.1:26379,10.0.0.2:26379; unset it to connect to REDIS_URL directly.",
    "REDIS_SENTINEL_MASTER": "Give the name Sentinel knows the primary by (`sentinel monitor "
    "<name> ...`); it is needed with REDIS_SENTINELS.",
    "MCP_PROBE_SECONDS": "Use seconds between 0.1 and 3600 between checks of each MCP server.",
    "REDIS_CLUSTER": "Use true (REDIS_URL names any node of a Redis Cluster) or false.",
    "REDIS_SHARDS": "Use a whole number of shards from 1 to 1024, and only with "
    "REDIS_CLUSTER=true; never change it while runs wait (they would not be found).",
    "MCP_WAIT_SECONDS": "Use seconds between 0 and 600 that a run waits for an MCP server.",
}

_PRINCIPALS = r"^\s*([UWS][A-Z0-9]{2,31}\s*(,\s*[UWS][A-Z0-9]{2,31}\s*)*)?$"


class RuntimeSettings(BaseSettings):
    """Everything the worker side needs; nothing here is Slack's."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    redis_url: str = Field("redis://localhost:6379/0", validation_alias="REDIS_URL")
    redis_tls_url: str | None = Field(None, validation_alias="REDIS_TLS_URL")
    """Heroku sets both; the TLS one wins."""
    redis_tls_verify: bool = Field(True, validation_alias="REDIS_TLS_VERIFY")
    """Check a rediss:// server's certificate and host name. Heroku Redis's certificate is
    self-signed, so Heroku needs false: TLS then still encrypts, but does not authenticate."""
    redis_tls_ca_file: FilePath | None = Field(None, validation_alias="REDIS_TLS_CA_FILE")
    """Trust the CAs in this PEM file (e.g. a self-signed server's own certificate) instead of
    the system's."""
    redis_key_prefix: str = Field(
        "countersign:", validation_alias="REDIS_KEY_PREFIX", pattern=r"^[A-Za-z0-9:_\-]{1,64}$"
    )
    agents: str = Field(
        "runtime.examples:AGENTS", validation_alias="AGENTS", pattern=r"^[\w.]+:[\w.]+$"
    )
    approval_ttl_seconds: int = Field(
        3600, validation_alias="APPROVAL_TTL_SECONDS", ge=1, le=604800
    )
    conversation_ttl_seconds: int = Field(
        604800, validation_alias="CONVERSATION_TTL_SECONDS", ge=60, le=7776000
    )
    """A thread's history is forgotten this long after its last turn."""
    conversation_max_items: int = Field(
        200, validation_alias="CONVERSATION_MAX_ITEMS", ge=2, le=5000
    )
    """A thread's history keeps at most this many items (messages, tool calls, outputs), the
    newest."""
    worker_concurrency: int = Field(64, validation_alias="WORKER_CONCURRENCY", ge=1, le=256)
    """Runs one worker works on at once. A run costs the worker 12-20 ms of CPU and ~120 KiB
    while in flight, whatever the concurrency (bench/concurrency.py, 1 to 256); the rest of its
    time it waits on the model. So a worker is latency-bound (concurrency / model time) until it
    is CPU-bound (60-80 runs/s on one core): at a 1 s model call, 64 runs at once did 55 runs/s
    with the worker at 80% of a core, and 128 or 256 added little. Higher helps only slower
    models, and costs a Redis connection per run (a busy worker opens up to this + 8: mind a
    managed plan's connection limit) and a look at its stop mark every 5 s per working run."""
    max_turns: int = Field(10, validation_alias="MAX_TURNS", ge=1, le=100)
    model_retries: int = Field(4, validation_alias="MODEL_RETRIES", ge=0, le=20)
    """A model call answered 429 or 5xx, or cut off, is tried again this many times inside the
    run (`runtime.models.retries`), after the `openai` client's own two tries, before the job is
    retried: a short outage neither requeues the job nor spends one of `JOB_MAX_DELIVERIES`."""
    job_max_deliveries: int = Field(3, validation_alias="JOB_MAX_DELIVERIES", ge=1, le=20)
    job_idle_timeout_seconds: float = Field(
        30.0, validation_alias="JOB_IDLE_TIMEOUT_SECONDS", ge=0.5, le=3600
    )
    """A job whose worker stops heartbeating for this long is handed to another worker."""
    job_timeout_seconds: float = Field(
        900.0, validation_alias="JOB_TIMEOUT_SECONDS", ge=1, le=86400
    )
    """A job running longer is cancelled and retried, up to `JOB_MAX_DELIVERIES` attempts."""
    shutdown_grace_seconds: float = Field(
        25.0, validation_alias="SHUTDOWN_GRACE_SECONDS", ge=0, le=3600
    )
    """After SIGTERM, a process's whole stop fits in this (`runtime.process.shutdown_budget`): the
    worker's running jobs finishing, then cancelling and handing back the rest; the web's
    requests in flight, then the Slack updates they started."""
    worker_niceness: int = Field(10, validation_alias="WORKER_NICENESS", ge=0, le=19)
    """Where web and worker share CPUs, the worker yields: Slack's 3 s are the hard deadline."""

    # --- who may decide (see runtime/policy/rules.py) ---
    approvers: str = Field("", validation_alias="APPROVERS", pattern=_PRINCIPALS)
    """Comma-separated user and user-group ids; empty means anyone in the channel."""
    allow_self_approval: bool = Field(False, validation_alias="ALLOW_SELF_APPROVAL")
    admins: str = Field("", validation_alias="ADMINS", pattern=_PRINCIPALS)
    """Users and user groups who may stop any run (besides its requester and approvers)."""
    external_deciders: Literal["deny", "allow"] = Field(
        "deny", validation_alias="EXTERNAL_DECIDERS"
    )
    """`allow`: people outside the installing workspace (Slack Connect users of another
    organisation, guests) may decide, grant, stop and revoke too; a rule's `external` wins."""
    external_requesters: Literal["deny", "allow"] = Field(
        "deny", validation_alias="EXTERNAL_REQUESTERS"
    )
    """`allow`: people outside the installing workspace may start runs too (`/agent`, a mention,
    a reply in a run's thread), and their runs carry `Conversation.requester_external`; `deny`:
    they are told why, and nothing starts."""
    policy_file: str | None = Field(None, validation_alias="POLICY_FILE")
    reminder_at: tuple[Annotated[float, Field(ge=0, lt=1)], ...] = Field(
        (0.5,), validation_alias="REMINDER_AT", max_length=10
    )
    """Remind the approvers at each of these fractions of an approval's lifetime (`0.5,0.9`);
    0 turns it off."""
    audit_retention_days: int = Field(90, validation_alias="AUDIT_RETENTION_DAYS", ge=1, le=3650)
    audit_args: Literal["on", "off"] = Field("on", validation_alias="AUDIT_ARGS")
    """`on`: the `requested`, `auto_approved`, `auto_rejected` and `grant_used` entries keep the
    call's arguments (`runtime.audit.arguments`); `off`: their digest only."""
    audit_args_max_bytes: int = Field(
        8192, validation_alias="AUDIT_ARGS_MAX_BYTES", ge=0, le=1_048_576
    )
    """Arguments longer than this (UTF-8) are not kept: the entry says so, beside the digest."""
    quick_approval_seconds: float = Field(
        5.0, validation_alias="QUICK_APPROVAL_SECONDS", ge=0, le=3600
    )
    """An approval within this many seconds of the card appearing is a quick one (a sign of
    rubber-stamping): counted per person by `/agent stats`, per tool in the metrics."""
    grant_max_seconds: int = Field(86400, validation_alias="GRANT_MAX_SECONDS", ge=0, le=604800)
    """The longest grant a card offers where the policy rule says nothing; 0 turns grants off."""

    # --- operating it ---
    metrics_port: int | None = Field(None, validation_alias="METRICS_PORT", ge=1, le=65535)
    """A worker serves `GET /metrics` and `GET /readyz` on this port; unset, neither. (The web
    process serves both on `PORT`.)"""
    log_format: LogFormat = Field("text", validation_alias="LOG_FORMAT")
    """`json`: one JSON object per line, with the run id where known."""
    redis_cluster: bool = Field(False, validation_alias="REDIS_CLUSTER")
    """`REDIS_URL` names a node of a Redis Cluster: connect with the cluster client and shard
    the keys (`runtime.db.keys`) so that each script touches one slot."""
    redis_shards: int | None = Field(None, validation_alias="REDIS_SHARDS", ge=1, le=1024)
    """How many shards the keys are split into with `REDIS_CLUSTER=true` (default 16)."""

    # --- replicated Redis (runtime/db/replication.py, runtime/db/sentinel.py) ---
    redis_min_replicas: int = Field(0, validation_alias="REDIS_MIN_REPLICAS", ge=0, le=5)
    """After each decision and enqueue, `WAIT` for this many replicas before acknowledging it,
    so that a failover loses nothing acknowledged; 0 waits for none."""
    redis_wait_ms: int = Field(500, validation_alias="REDIS_WAIT_MS", ge=1, le=2000)
    """How long to wait for them; then the person is asked to try again."""
    redis_sentinels: str | None = Field(
        None,
        validation_alias="REDIS_SENTINELS",
        pattern=r"^\s*[^\s,:]+:\d{1,5}\s*(,\s*[^\s,:]+:\d{1,5}\s*)*$",
    )
    """`host:port,host:port`: find the primary through these Sentinels (and follow a failover);
    `REDIS_URL` then gives only the scheme (rediss:// for TLS), password and database."""
    redis_sentinel_master: str | None = Field(
        None,
        validation_alias="REDIS_SENTINEL_MASTER",
        pattern=r"^[\w.\-]{1,128}$",
        validate_default=True,
    )

    @field_validator("redis_url", "redis_tls_url")
    @classmethod
    def _a_redis_url(cls, value: str | None) -> str | None:
        # redis-py's own reading of the URL, at start: otherwise its ValueError came out of the
        # first command, as a traceback.
        if value is not None:
            try:
                parse_url(value)
            except ValueError as error:
                raise PydanticCustomError("redis_url", str(error)) from None
        return value

    @field_validator("redis_min_replicas", "redis_sentinels")
    @classmethod
    def _not_in_a_cluster(cls, value: object, info: ValidationInfo) -> object:
        # A cluster fails over on its own, and WAIT counts one node's replicas, not those of
        # the node that took the write: neither setting means what it says there.
        if value and info.data.get("redis_cluster"):
            raise ValueError("not with REDIS_CLUSTER=true (a cluster fails over by itself)")
        return value

    @field_validator("redis_sentinel_master")
    @classmethod
    def _named_with_sentinels(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("redis_sentinels"):
            raise PydanticCustomError("missing", "needed with REDIS_SENTINELS")  # "is not set"
        return value

    # --- MCP servers (see runtime/mcp/connections.py) ---
    mcp_probe_seconds: float = Field(5.0, validation_alias="MCP_PROBE_SECONDS", ge=0.1, le=3600)
    """How often the worker checks that each MCP server still answers."""
    mcp_wait_seconds: float = Field(30.0, validation_alias="MCP_WAIT_SECONDS", ge=0, le=600)
    """How long a run waits for a down MCP server (reconnected meanwhile) before it stops."""

    # --- first run ---
    openai_api_key: SecretStr | None = Field(None, validation_alias="OPENAI_API_KEY")
    """Read by the `openai` client itself; here only to know whether it is set: without it,
    the bundled example agents run on a scripted model (`runtime.models.scripted`)."""

    @field_validator("reminder_at", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("reminder_at")
    @classmethod
    def _in_order(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(sorted({fraction for fraction in value if fraction > 0}))

    @field_validator("redis_shards")
    @classmethod
    def _only_in_a_cluster(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value > 1 and not info.data.get("redis_cluster"):
            raise ValueError("shards are for REDIS_CLUSTER=true")
        return value

    @property
    def shard_count(self) -> int:
        """1 without a cluster: the key names of every earlier version (`runtime.db.keys`)."""
        if not self.redis_cluster:
            return 1
        return self.redis_shards or DEFAULT_CLUSTER_SHARDS

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """`REDIS_SENTINELS` as (host, port) pairs; empty when unset."""
        pairs = [p.strip().rsplit(":", 1) for p in (self.redis_sentinels or "").split(",")]
        return [(host, int(port)) for host, port in (p for p in pairs if len(p) == 2)]

    @property
    def effective_redis_url(self) -> str:
        return self.redis_tls_url or self.redis_url

    @property
    def redis_url_setting(self) -> str:
        """The variable(s) naming where Redis is: what to tell the operator to check."""
        if self.redis_sentinels:
            return "REDIS_SENTINELS, REDIS_SENTINEL_MASTER"
        return "REDIS_TLS_URL" if self.redis_tls_url else "REDIS_URL"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only what from_environ() passes in: tests hand over a mapping, processes os.environ,
        # and nothing is read behind the caller's back.
        return (init_settings,)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        source = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in cls.model_fields.values():
            alias = field.validation_alias
            if isinstance(alias, str) and source.get(alias, "") != "":
                values[alias] = source[alias]
        return cls(**values)


def describe_settings_error(error: ValidationError, fixes: Mapping[str, str]) -> str:
    lines = ["Countersign cannot start: its configuration is incomplete or invalid."]
    lines += [f"  - {problem}" for problem in settings_problems(error, fixes)]
    return "\n".join(lines)


def settings_problems(error: ValidationError, fixes: Mapping[str, str]) -> list[str]:
    """One line per variable at fault: what is wrong with it and how to fix it."""
    lines = []
    for problem in error.errors():
        # A field checked against its default is named by field, not variable: same letters.
        variable = str(problem["loc"][0]).upper() if problem["loc"] else "?"
        reason = _reason(problem["type"], problem["msg"])
        fix = fixes.get(variable, "")
        lines.append(f"{variable} {reason}. {fix}".rstrip())
    return lines


def _reason(kind: str, message: str) -> str:
    if kind == "missing":
        return "is not set"
    if kind == "string_pattern_mismatch":
        # A regular expression tells the operator nothing: the fix says what the value looks like.
        return "is invalid (not in the form it takes)"
    return f"is invalid ({message})"
