"""The stand-in Slack's people, channels and user groups: who is who, and who is in what.

Part of `bot.console.local_slack` (its `users.info`, `conversations.info`,
`conversations.members`, `usergroups.list` and `usergroups.users.list`), kept apart for size.
"""

from __future__ import annotations

from typing import Any

TEAM = "T0001"
BOT_USER = "UBOT0001"


class LocalDirectory:
    def __init__(self) -> None:
        self.users: dict[str, str] = {}
        """Display names by user id (`users.info`)."""
        self.people: dict[str, dict[str, Any]] = {}
        """What `users.info` says of a person beyond a full member of `TEAM` (the default for
        any id): another `team_id` (Slack Connect), `is_restricted` (a guest), `enterprise_user`."""
        self.enterprise: str | None = None
        """The Enterprise Grid organisation the workspace is part of (`auth.test`), if any."""
        self.channels: dict[str, str] = {}
        """Channel names by id (`conversations.info`)."""
        self.groups: dict[str, dict[str, Any]] = {}
        """User groups by id, `{"handle": ..., "users": [...]}` (`usergroups.*`)."""
        self.channel_members: dict[str, list[str]] = {}
        """Who is in each channel (`conversations.members`); a direct message (`D` + a user id)
        has that person and the app; any other channel is unknown (`channel_not_found`)."""

    def directory_answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """Who people are and which groups they are in."""
        if method == "users.info":
            # Anyone who can click is someone here: a full member of TEAM unless `people` says
            # otherwise (Slack's shape: `team_id`, `is_restricted`, `enterprise_user`, ...).
            user_id = str(args.get("user"))
            name = self.users.get(user_id)
            profile = {"display_name": name or "", "real_name": name or ""}
            user = {
                "id": user_id,
                "team_id": TEAM,
                "name": name.lower() if name else user_id,
                "deleted": False,
                "is_restricted": False,
                "is_ultra_restricted": False,
                "is_bot": False,
                "profile": profile,
                **self.people.get(user_id, {}),
            }
            return {"ok": True, "user": user}
        if method == "conversations.info":
            channel_id = str(args.get("channel"))
            if channel_id not in self.channels:
                return {"ok": False, "error": "channel_not_found"}
            return {"ok": True, "channel": {"id": channel_id, "name": self.channels[channel_id]}}
        if method == "usergroups.list":
            groups = [
                {"id": gid, "handle": g["handle"], "name": g["handle"]}
                for gid, g in self.groups.items()
            ]
            return {"ok": True, "usergroups": groups}
        if method == "usergroups.users.list":
            group = self.groups.get(str(args.get("usergroup")))
            if group is None:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": list(group["users"])}
        if method == "conversations.members":
            return self._members(args)
        return {"ok": False, "error": "unknown_method"}

    def _members(self, args: dict[str, Any]) -> dict[str, Any]:
        """A page of a channel's members, as Slack pages them (`limit`, `cursor`)."""
        channel = str(args.get("channel"))
        if channel.startswith("D") and channel not in self.channel_members:
            members = [channel[1:], BOT_USER]
        elif channel in self.channel_members:
            members = list(self.channel_members[channel])
        else:
            return {"ok": False, "error": "channel_not_found"}
        start, limit = int(args.get("cursor") or 0), int(args.get("limit") or 100)
        page, rest = members[start : start + limit], members[start + limit :]
        cursor = str(start + limit) if rest else ""
        return {"ok": True, "members": page, "response_metadata": {"next_cursor": cursor}}
