"""The console's pretend workspace: its people, its channel, and what the demo sets for them.

The demo's settings name these people, so that the Home tab and copies in direct messages have
someone to show things to: all three may approve (nobody their own requests), and the demo's
policy (`demo_policy.toml`) sends carol a copy of every refund card. Settings given in the
environment win over both.
"""

from __future__ import annotations

from pathlib import Path

from bot.console.intents import Person

PEOPLE = (
    Person("UALICE", "alice"),
    Person("UBOB", "bob"),
    Person("UCAROL", "carol"),
)
CHANNEL, CHANNEL_NAME = "CDEMO", "demo"
DEMO_POLICY = Path(__file__).with_name("demo_policy.toml")


def demo_defaults() -> dict[str, str]:
    """Settings the demo uses unless the environment says otherwise."""
    return {
        "APPROVERS": ",".join(person.id for person in PEOPLE),
        "POLICY_FILE": str(DEMO_POLICY),
        # A run started in someone's Messages tab asks in #demo, where the approvers are.
        "APPROVAL_CHANNEL": CHANNEL,
    }
