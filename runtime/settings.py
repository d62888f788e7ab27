"""Settings of the agent runtime: the worker's and the CLI's `Settings`, read from the
environment once per process by pydantic-settings (`runtime.process.environment`).

`bot.settings.Settings` extends these with the Slack credentials, for the web process.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, FilePath, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import NoDecode
from redis.asyncio.connection import parse_url

from runtime.process.environment import EnvironSettings, setting
from runtime.process.logs import LogFormat

DEFAULT_CLUSTER_SHARDS = 16
"""Shards on a Redis Cluster when `REDIS_SHARDS` is not set (`runtime.db.keys` shards by it)."""

__all__ = ["RuntimeSettings", "setting"]

_PRINCIPALS = r"^\s*([UWS][A-Z0-9]{2,31}\s*(,\s*[UWS][A-Z0-9]{2,31}\s*)*)?$"


class RuntimeSettings(EnvironSettings):
    """Everything the worker side needs; nothing here is Slack's."""

    redis_url: str = setting(
        "redis://localhost:6379/0",
        fix="Set it to a Redis URL such as redis://localhost:6379/0 (rediss:// for TLS).",
    )
    redis_tls_url: str | None = setting(
        None, fix="Set it to a rediss:// URL, or unset it to use REDIS_URL."
    )
    """Heroku sets both; the TLS one wins."""
    redis_tls_verify: bool = setting(
        True,
        fix="Use true (check the rediss:// server's certificate, the default) or false (Heroku "
        "Redis, whose certificate is self-signed).",
    )
    """Check a rediss:// server's certificate and host name. Heroku Redis's certificate is
    self-signed, so Heroku needs false: TLS then still encrypts, but does not authenticate."""
    redis_tls_ca_file: FilePath | None = setting(
        None,
        fix="Give the path of a PEM file with the CA certificate(s) that signed your Redis "
        "server's certificate.",
    )
    """Trust the CAs in this PEM file (e.g. a self-signed server's own certificate) instead of
    the system's."""
    redis_key_prefix: str = setting(
        "countersign:",
        pattern=r"^[A-Za-z0-9:_\-]{1,64}$",
        fix="Use a short prefix such as countersign: (letters, digits, : _ -).",
    )
    agents: str = setting(
        "runtime.examples:AGENTS",
        pattern=r"^[\w.]+:[\w.]+$",
        fix="Name the registry as module:attribute, e.g. runtime.examples:AGENTS.",
    )
    approval_ttl_seconds: int = setting(
        3600, ge=1, le=604800, fix="Use a whole number of seconds between 1 and 604800 (7 days)."
    )
    conversation_ttl_seconds: int = setting(
        604800,
        ge=60,
        le=7776000,
        fix="Use a whole number of seconds between 60 and 7776000 (90 days).",
    )
    """A thread's history is forgotten this long after its last turn."""
    conversation_max_items: int = setting(
        200, ge=2, le=5000, fix="Use a whole number of history items between 2 and 5000."
    )
    """A thread's history keeps at most this many items (messages, tool calls, outputs), the
    newest."""
    worker_concurrency: int = setting(
        64, ge=1, le=256, fix="Use a whole number of concurrent runs per worker between 1 and 256."
    )
    """Runs one worker works on at once. A run costs the worker 12-20 ms of CPU and ~120 KiB
    while in flight, whatever the concurrency (bench/concurrency.py, 1 to 256); the rest of its
    time it waits on the model. So a worker is latency-bound (concurrency / model time) until it
    is CPU-bound (60-80 runs/s on one core): at a 1 s model call, 64 runs at once did 55 runs/s
    with the worker at 80% of a core, and 128 or 256 added little. Higher helps only slower
    models, and costs a Redis connection per run (a busy worker opens up to this + 8: mind a
    managed plan's connection limit) and a look at its stop mark every 5 s per working run."""
    max_turns: int = setting(
        10, ge=1, le=100, fix="Use a whole number of model turns per run between 1 and 100."
    )
    model_retries: int = setting(
        4,
        ge=0,
        le=20,
        fix="Use a whole number of retries of a model call inside the run, from 0 (none: the job "
        "is retried instead) to 20.",
    )
    """A model call answered 429 or 5xx, or cut off, is tried again this many times inside the
    run (`runtime.models.retries`), after the `openai` client's own two tries, before the job is
    retried: a short outage neither requeues the job nor spends one of `JOB_MAX_DELIVERIES`."""
    job_max_deliveries: int = setting(
        3, ge=1, le=20, fix="Use a whole number of attempts between 1 and 20."
    )
    job_idle_timeout_seconds: float = setting(
        30.0, ge=0.5, le=3600, fix="Use a number of seconds between 0.5 and 3600."
    )
    """A job whose worker stops heartbeating for this long is handed to another worker."""
    job_timeout_seconds: float = setting(
        900.0, ge=1, le=86400, fix="Use a number of seconds between 1 and 86400 (a day)."
    )
    """A job running longer is cancelled and retried, up to `JOB_MAX_DELIVERIES` attempts."""
    shutdown_grace_seconds: float = setting(
        25.0,
        ge=0,
        le=3600,
        fix="Use seconds between 0 and 3600 for the whole stop after SIGTERM (Heroku kills 30 s "
        "after it).",
    )
    """After SIGTERM, a process's whole stop fits in this (`runtime.process.shutdown_budget`): the
    worker's running jobs finishing, then cancelling and handing back the rest; the web's
    requests in flight, then the Slack updates they started."""
    worker_niceness: int = setting(
        10, ge=0, le=19, fix="Use a whole number from 0 (no change) to 19 (yield the most)."
    )
    """Where web and worker share CPUs, the worker yields: Slack's 3 s are the hard deadline."""

    # --- who may decide (see runtime/policy/rules.py) ---
    approvers: str = setting(
        "",
        pattern=_PRINCIPALS,
        fix="List Slack user ids and user-group ids, comma-separated, not names: a user id is U or "
        "W and capital letters and digits (U024BE7LH; in Slack, a person's profile, More, Copy "
        "member ID), a group's is S and the same (S0614TZR7).",
    )
    """Comma-separated user and user-group ids; empty means anyone in the channel."""
    allow_self_approval: bool = setting(False, fix="Use true or false.")
    approval_channel: str | None = setting(
        None,
        pattern=r"^[CG][A-Z0-9]{2,31}$",
        fix="Use the id of the channel where approvers decide (C… or G…: in Slack, the channel's "
        "details, at the bottom), not its name; the app must be a member of it.",
    )
    """Where the cards of runs started in a direct message with the app go (a rule's `channel`
    wins): never only to the requester's private conversation."""
    admins: str = setting(
        "",
        pattern=_PRINCIPALS,
        fix="List the Slack user ids and user-group ids who may stop any run, comma-separated, not "
        "names: a user id is U or W and capital letters and digits (U024BE7LH), a group's is S "
        "and the same (S0614TZR7).",
    )
    """Users and user groups who may stop any run (besides its requester and approvers)."""
    external_deciders: Literal["deny", "allow"] = setting(
        "deny",
        fix="Use deny (the default: only full members of the installing workspace or its "
        "enterprise decide) or allow (Slack Connect users and guests may decide too).",
    )
    """`allow`: people outside the installing workspace (Slack Connect users of another
    organisation, guests) may decide, grant, stop and revoke too; a rule's `external` wins."""
    external_requesters: Literal["deny", "allow"] = setting(
        "deny",
        fix="Use deny (the default: only full members of the installing workspace or its "
        "enterprise start runs) or allow (Slack Connect users and guests may start runs too; "
        "no grant, Approve always or automatic approval covers their calls).",
    )
    """`allow`: people outside the installing workspace may start runs too (`/agent`, a mention,
    a reply in a run's thread), and their runs carry `Conversation.requester_external`; `deny`:
    they are told why, and nothing starts."""
    policy_file: str | None = setting(
        None, fix="Give the path of a TOML policy file, relative to the working directory."
    )
    reminder_at: Annotated[tuple[Annotated[float, Field(ge=0, lt=1)], ...], NoDecode] = setting(
        (0.5,),
        max_length=10,
        fix="Use fractions of the approval's lifetime from 0 (no reminder) to 0.99, "
        "comma-separated: 0.5,0.9 reminds at half time and near the end.",
    )
    """Remind the approvers at each of these fractions of an approval's lifetime (`0.5,0.9`);
    0 turns it off."""
    audit_retention_days: int = setting(
        90, ge=1, le=3650, fix="Use a whole number of days between 1 and 3650."
    )
    audit_args: Literal["on", "off"] = setting(
        "on",
        fix="Use on (the default: the trail keeps each call's arguments) or off (digests only).",
    )
    """`on`: the `requested`, `auto_approved`, `auto_rejected` and `grant_used` entries keep the
    call's arguments (`runtime.audit.arguments`); `off`: their digest only."""
    audit_args_max_bytes: int = setting(
        8192,
        ge=0,
        le=1_048_576,
        fix="Use a whole number of bytes between 0 and 1048576 (1 MiB); longer arguments are not "
        "kept, only their digest.",
    )
    """Arguments longer than this (UTF-8) are not kept: the entry says so, beside the digest."""
    quick_approval_seconds: float = setting(
        5.0,
        ge=0,
        le=3600,
        fix="Use a number of seconds between 0 and 3600: an approval given this soon after the "
        "card appeared counts as quick in `/agent stats` and the metrics.",
    )
    """An approval within this many seconds of the card appearing is a quick one (a sign of
    rubber-stamping): counted per person by `/agent stats`, per tool in the metrics."""
    grant_max_seconds: int = setting(
        86400,
        ge=0,
        le=604800,
        fix="Use a whole number of seconds from 0 (no grants) to 604800 (7 days).",
    )
    """The longest grant a card offers where the policy rule says nothing; 0 turns grants off."""

    # --- operating it ---
    metrics_port: int | None = setting(
        None,
        ge=1,
        le=65535,
        fix="Use a free TCP port (1-65535) for the worker's /metrics, or unset it.",
    )
    """A worker serves `GET /metrics` and `GET /readyz` on this port; unset, neither. (The web
    process serves both on `PORT`.)"""
    log_format: LogFormat = setting(
        "text", fix="Use text (the default) or json (one JSON object per line, for log drains)."
    )
    """`json`: one JSON object per line, with the run id where known."""
    redis_cluster: bool = setting(
        False, fix="Use true (REDIS_URL names any node of a Redis Cluster) or false."
    )
    """`REDIS_URL` names a node of a Redis Cluster: connect with the cluster client and shard
    the keys (`runtime.db.keys`) so that each script touches one slot."""
    redis_shards: int | None = setting(
        None,
        ge=1,
        le=1024,
        fix="Use a whole number of shards from 1 to 1024, and only with REDIS_CLUSTER=true; never "
        "change it while runs wait (they would not be found).",
    )
    """How many shards the keys are split into with `REDIS_CLUSTER=true` (default 16)."""

    # --- replicated Redis (runtime/db/replication.py, runtime/db/sentinel.py) ---
    redis_min_replicas: int = setting(
        0,
        ge=0,
        le=5,
        fix="Use a whole number of replicas from 0 (do not wait, the default) to 5 that must "
        "confirm each decision and job before it is acknowledged.",
    )
    """After each decision and enqueue, `WAIT` for this many replicas before acknowledging it,
    so that a failover loses nothing acknowledged; 0 waits for none."""
    redis_wait_ms: int = setting(
        500,
        ge=1,
        le=2000,
        fix="Use milliseconds between 1 and 2000 to wait for the replicas (clicks must be answered "
        "within Slack's 3 s).",
    )
    """How long to wait for them; then the person is asked to try again."""
    redis_sentinels: str | None = setting(
        None,
        pattern=r"^\s*[^\s,:]+:\d{1,5}\s*(,\s*[^\s,:]+:\d{1,5}\s*)*$",
        fix="List Sentinel addresses as host:port, comma-separated, e.g. "
        "10.0.0.1:26379,10.0.0.2:26379; unset it to connect to REDIS_URL directly.",
    )
    """`host:port,host:port`: find the primary through these Sentinels (and follow a failover);
    `REDIS_URL` then gives only the scheme (rediss:// for TLS), password and database."""
    redis_sentinel_master: str | None = setting(
        None,
        pattern=r"^[\w.\-]{1,128}$",
        validate_default=True,
        fix="Give the name Sentinel knows the primary by (`sentinel monitor <name> ...`); it is "
        "needed with REDIS_SENTINELS.",
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
    mcp_probe_seconds: float = setting(
        5.0,
        ge=0.1,
        le=3600,
        fix="Use seconds between 0.1 and 3600 between checks of each MCP server.",
    )
    """How often the worker checks that each MCP server still answers."""
    mcp_wait_seconds: float = setting(
        30.0, ge=0, le=600, fix="Use seconds between 0 and 600 that a run waits for an MCP server."
    )
    """How long a run waits for a down MCP server (reconnected meanwhile) before it stops."""
    elicitation_timeout_seconds: int = setting(
        600, ge=1, le=86400, fix="Use a whole number of seconds between 1 and 86400 (a day)."
    )
    """How long an MCP server's question (`elicitation/create`) waits for a person's answer
    before the worker answers `cancel` (`runtime.mcp.asking`)."""

    # --- first run ---
    openai_api_key: SecretStr | None = None
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
