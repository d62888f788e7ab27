"""Who may decide a call: one answer, given the same way the decision script gives it, and the
facts about a person it needs, asked only when they can change it.

Pure: imports nothing else of `runtime`, so every floor above may ask it. The Slack side (which
groups a person is in, whether they are a member of the workspace or of a channel) is found by
the caller and passed in, as values or through `Facts`.
"""

from runtime.deciders.asking import Facts, Members, decides, first_member_of, groups_of
from runtime.deciders.deciders import (
    Approvers,
    Deciders,
    Listed,
    Refusal,
    groups_to_ask,
    is_group,
    may_approve,
    may_decide,
    needs_groups,
    one_by_one,
    outsider_may_stop,
    own_call,
    refusal,
    split,
    stop_groups_to_ask,
    too_few,
)
from runtime.deciders.terms import TERMS, Asked, Terms, asks_more

__all__ = [
    "TERMS",
    "Approvers",
    "Asked",
    "Deciders",
    "Facts",
    "Listed",
    "Members",
    "Refusal",
    "Terms",
    "asks_more",
    "decides",
    "first_member_of",
    "groups_of",
    "groups_to_ask",
    "is_group",
    "may_approve",
    "may_decide",
    "needs_groups",
    "one_by_one",
    "outsider_may_stop",
    "own_call",
    "refusal",
    "split",
    "stop_groups_to_ask",
    "too_few",
]
