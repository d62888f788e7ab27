"""Countersign's Slack side: the web process and the Slack half of the worker.

Its floors, like `runtime`'s, are drawn in docs/architecture.md and checked by `lint-imports`.
"""
