"""The policy: its file of rules (who may decide which tool calls, how many must agree, which need
nobody) and the one judgement every call meets (`verdicts`).

Floor 4 (rules): imports `conditions` and `judging` beside it and the floors below.
"""

from runtime.policy.loading import load_policy
from runtime.policy.responders import responders_for
from runtime.policy.rules import Policy, PolicyError, Rule, parse_principals
from runtime.policy.verdicts import Verdict, judge

__all__ = [
    "Policy",
    "PolicyError",
    "Rule",
    "Verdict",
    "judge",
    "load_policy",
    "parse_principals",
    "responders_for",
]
