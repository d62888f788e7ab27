"""Slack itself: Web API clients, payloads, the directory of users and groups, links, and the
requests this web process is answering.

Bottom floor of `bot`: imports nothing else of `bot`; of `runtime`, only package faces.
"""
