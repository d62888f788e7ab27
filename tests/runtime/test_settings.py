"""Settings: read once from the environment; a bad one stops the process and names the fix."""

from __future__ import annotations

import pytest

from bot.settings import (
    CONSOLE_BOT_TOKEN,
    Settings,
    SettingsError,
    load_settings,
    with_console_defaults,
)

REQUIRED = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}


def test_defaults() -> None:
    settings = load_settings(REQUIRED)
    assert settings.slack_api_url == "https://slack.com/api/"
    assert settings.effective_redis_url == "redis://localhost:6379/0"
    assert settings.port == 3000
    assert settings.agents == "runtime.examples:AGENTS"
    assert settings.approval_ttl_seconds == 3600


def test_the_tls_redis_url_wins_as_on_heroku() -> None:
    settings = load_settings(
        {**REQUIRED, "REDIS_URL": "redis://plain:1/0", "REDIS_TLS_URL": "rediss://tls:2/0"}
    )
    assert settings.effective_redis_url == "rediss://tls:2/0"


def test_secrets_do_not_show_in_reprs() -> None:
    assert "xoxb-1" not in repr(load_settings(REQUIRED))


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (
            {},
            [
                "SLACK_BOT_TOKEN is not set. Copy the Bot User OAuth Token",
                "SLACK_SIGNING_SECRET is not set. Copy the Signing Secret",
            ],
        ),
        ({**REQUIRED, "PORT": "http"}, ["PORT is invalid", "Use a TCP port number"]),
        ({**REQUIRED, "APPROVAL_TTL_SECONDS": "0"}, ["APPROVAL_TTL_SECONDS is invalid"]),
        ({**REQUIRED, "AGENTS": "agents.py"}, ["AGENTS is invalid", "module:attribute"]),
        (
            {**REQUIRED, "JOB_TIMEOUT_SECONDS": "0"},
            ["JOB_TIMEOUT_SECONDS is invalid", "between 1 and 86400"],
        ),
        ({**REQUIRED, "SLACK_API_URL": "slack.com"}, ["SLACK_API_URL is invalid", "/api/"]),
        (
            {**REQUIRED, "APPROVERS": "@bob, alice"},
            ["APPROVERS is invalid (not in the form it takes). List Slack user ids", "U024BE7LH"],
        ),
        (
            {**REQUIRED, "EXTERNAL_DECIDERS": "guests"},
            ["EXTERNAL_DECIDERS is invalid", "Use deny (the default"],
        ),
    ],
)
def test_a_bad_environment_names_each_variable_and_its_fix(
    environ: dict[str, str], expected: list[str]
) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(environ)
    for fragment in expected:
        assert fragment in str(raised.value)
    assert "^" not in str(raised.value), "no regular expression shown"


def test_every_variable_says_how_to_fix_it() -> None:
    """What to tell the operator is declared on each field (`setting(..., fix=...)`)."""
    unfixed = {name.upper() for name in Settings.model_fields if not Settings.fix(name)}
    assert unfixed == {"OPENAI_API_KEY"}, "any value will do: the openai client reads it"


def test_a_variable_is_its_fields_name_in_any_case_and_empty_is_unset() -> None:
    settings = load_settings(
        {"slack_bot_token": "xoxb-1", "Slack_Signing_Secret": "s", "max_turns": "3", "PORT": ""}
    )
    assert (settings.max_turns, settings.port) == (3, 3000)


def test_an_unimportable_registry_names_the_module() -> None:
    from runtime.registry import RegistryError, load_registry

    with pytest.raises(RegistryError, match="cannot import module 'nowhere'"):
        load_registry("nowhere:AGENTS")
    with pytest.raises(RegistryError, match="has no attribute 'MISSING'"):
        load_registry("tests.support.agents:MISSING")
    with pytest.raises(RegistryError, match="list of Agent objects"):
        load_registry("tests.support.agents:ops")


@pytest.mark.parametrize(
    "credential",
    [
        {"SLACK_BOT_TOKEN": "xoxb-real"},
        {"SLACK_SIGNING_SECRET": "real-secret"},
        {"SLACK_APP_TOKEN": "xapp-real"},
    ],
    ids=["bot-token", "signing-secret", "app-token"],
)
def test_the_console_refuses_a_real_slack_apps_credentials(credential: dict[str, str]) -> None:
    [name] = credential
    with pytest.raises(SettingsError) as raised:
        with_console_defaults({"CONSOLE": "true", **credential})
    message = str(raised.value)
    assert message.startswith(f"CONSOLE=true cannot be used with {name} set: ")
    assert "\n" not in message
    assert with_console_defaults(credential) == credential, "without the console: as given"


def test_the_console_makes_up_its_own_credentials() -> None:
    values = with_console_defaults(
        {"CONSOLE": "true", "SLACK_BOT_TOKEN": CONSOLE_BOT_TOKEN, "SLACK_APP_TOKEN": ""}
    )
    settings = load_settings(values)
    assert settings.slack_bot_token.get_secret_value() == CONSOLE_BOT_TOKEN
    assert settings.slack_app_token is None


@pytest.mark.parametrize("value", ["true", "t", "y", "YES", "1", "on", "f", "no", "0", "off"])
def test_console_is_true_or_false_to_its_defaults_as_to_the_settings(value: str) -> None:
    """One reading of a boolean: `CONSOLE=t` is true to pydantic, so to the console's too."""
    values = with_console_defaults({"CONSOLE": value})
    settings = load_settings({**REQUIRED, **values})
    assert (values.get("SLACK_BOT_TOKEN") == CONSOLE_BOT_TOKEN) is settings.console
    assert settings.console is (value.lower() in {"true", "t", "y", "yes", "1", "on"})
