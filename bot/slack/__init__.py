"""Slack itself: Web API clients, payloads, the directory of users and groups, links."""
