"""The one settings object of a Countersign process: the runtime's plus Slack's."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, SecretStr, ValidationError

from runtime.settings import FIXES as RUNTIME_FIXES
from runtime.settings import RuntimeSettings, describe_settings_error

FIXES: dict[str, str] = {
    **RUNTIME_FIXES,
    "SLACK_BOT_TOKEN": "Copy the Bot User OAuth Token (xoxb-...) from your Slack app's "
    "OAuth & Permissions page.",
    "SLACK_SIGNING_SECRET": "Copy the Signing Secret from your Slack app's Basic Information page.",
    "SLACK_API_URL": "Use an https URL ending in /api/, e.g. https://slack.com/api/.",
    "PORT": "Use a TCP port number between 1 and 65535.",
}


class Settings(RuntimeSettings):
    slack_bot_token: SecretStr = Field(validation_alias="SLACK_BOT_TOKEN", min_length=1)
    slack_signing_secret: SecretStr = Field(validation_alias="SLACK_SIGNING_SECRET", min_length=1)
    slack_api_url: str = Field(
        "https://slack.com/api/", validation_alias="SLACK_API_URL", pattern=r"^https?://.+/$"
    )
    port: int = Field(3000, validation_alias="PORT", ge=1, le=65535)


class SettingsError(Exception):
    """The environment does not configure Countersign; the message names each fix."""


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    try:
        return Settings.from_environ(environ)
    except ValidationError as error:
        raise SettingsError(describe_settings_error(error, FIXES)) from None
