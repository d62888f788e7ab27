"""The web process's `Settings`: the runtime's plus Slack's, read once from the environment."""

from __future__ import annotations

from collections.abc import Mapping
from secrets import token_hex

from pydantic import SecretStr, TypeAdapter, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from runtime.settings import RuntimeSettings, setting


class Settings(RuntimeSettings):
    """The web process's: the runtime's settings (it enqueues runs and records decisions)
    and Slack's."""

    slack_bot_token: SecretStr = setting(
        min_length=1,
        fix="Copy the Bot User OAuth Token (xoxb-...) from your Slack app's OAuth & Permissions "
        "page.",
    )
    slack_signing_secret: SecretStr = setting(
        min_length=1, fix="Copy the Signing Secret from your Slack app's Basic Information page."
    )
    slack_api_url: str = setting(
        "https://slack.com/api/",
        pattern=r"^https?://.+/$",
        fix="Use an https URL ending in /api/, e.g. https://slack.com/api/.",
    )
    port: int = setting(3000, ge=1, le=65535, fix="Use a TCP port number between 1 and 65535.")

    # --- the Home tab at scale ---
    home_publishes_per_minute: int = setting(
        100,
        ge=1,
        le=100_000,
        fix="Use a whole number of Home tab publishes a minute (1-100000); Slack allows "
        "views.publish 100 or more a minute per workspace.",
    )
    """`views.publish` calls a minute, all web processes together (`bot.home.pace`)."""
    home_redis_connections: int = setting(
        8,
        ge=1,
        le=1000,
        fix="Use a whole number of Redis connections (1-1000) for the web process's Home tab work.",
    )
    """The web's Redis connections for Home tab work, apart from the clicks' (`bot.wiring`)."""

    streaming: bool = setting(
        True,
        fix="Use off to keep to the status message and its Stop button (no Slack agent "
        "sessions), or on (the default).",
    )
    """Show each run's thread as a Slack agent session (`bot.reporting.sessions`)."""

    # --- first run: the local console and Socket Mode ---
    console: bool = setting(
        False, fix="Use true to serve the local console at /console, or false (the default)."
    )
    """Serve the console at /console and talk to its stand-in Slack API instead of Slack."""
    slack_app_token: SecretStr | None = setting(
        None,
        fix="Create an app-level token with the connections:write scope on your Slack app's Basic "
        "Information page (xapp-...), or unset it to receive Slack's requests over HTTP.",
    )
    """An app-level token (xapp-...): Slack's requests arrive over Socket Mode."""

    @field_validator("slack_bot_token")
    @classmethod
    def _a_bot_token(cls, value: SecretStr) -> SecretStr:
        # Slack would answer `not_allowed_token_type` or `invalid_auth` to every call; a user
        # token (xoxp-), an app-level one (xapp-) or a pasted space is told here, at start.
        token = value.get_secret_value()
        if not token.startswith("xoxb-") or token != token.strip() or " " in token:
            raise PydanticCustomError("bot_token", "not a bot token, which starts with xoxb-")
        return value

    @property
    def effective_slack_api_url(self) -> str:
        """Where both processes send Web API calls: Slack, or the console's stand-in."""
        if self.console:
            return f"http://127.0.0.1:{self.port}{CONSOLE_PREFIX}api/"
        return self.slack_api_url


class SettingsError(Exception):
    """The environment does not configure Countersign; the message names each fix."""


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    try:
        return Settings.from_environ(environ)
    except ValidationError as error:
        raise SettingsError(Settings.described(error)) from None


# --- first run: the local console and Socket Mode ---

CONSOLE_PREFIX = "/console/"
CONSOLE_BOT_TOKEN = "xoxb-console-local"
SLACK_CREDENTIALS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN")
_BOOLEAN: TypeAdapter[bool] = TypeAdapter(bool)


def is_true(value: str) -> bool:
    """A boolean setting read as the settings read it (pydantic: `true`, `t`, `yes`, `y`, `on`,
    `1`, in any case): with a list of its own, `CONSOLE=t` was true to the settings and false
    here, and the demo stopped for want of a Slack token."""
    try:
        return _BOOLEAN.validate_python(value)
    except ValidationError:
        return False


def with_console_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """With CONSOLE=true no Slack app is needed: Slack credentials get local stand-ins.

    The signing secret is made up per process: only the web process signs (for the console)
    and checks signatures, so nothing else needs to know it. A real Slack app's credentials are
    refused: the console has no login and signs whatever it is sent, so with the app's signing
    secret anyone who reaches it could act as Slack, and with its token post as the app.
    """
    values = dict(environ)
    if not is_true(values.get("CONSOLE", "")):
        return values
    for name in SLACK_CREDENTIALS:
        value = values.get(name, "").strip()
        if value and not (name == "SLACK_BOT_TOKEN" and value == CONSOLE_BOT_TOKEN):
            raise SettingsError(
                f"CONSOLE=true cannot be used with {name} set: the console has no login and "
                f"would act with your Slack app's credentials. Unset {name} (and the other "
                "Slack settings) to try the console, or unset CONSOLE to run with Slack."
            )
    values["SLACK_BOT_TOKEN"] = CONSOLE_BOT_TOKEN
    values["SLACK_SIGNING_SECRET"] = token_hex(16)
    return values
