"""Countersign's runtime: runs agents, asks for approvals, and keeps every run in Redis.

Its packages stand on seven floors, each importing only its own and those below (drawn in
docs/architecture.md, checked by `lint-imports` against pyproject's `[tool.importlinter]`):
processes and the CLI; a run; a call's actions; the rules; the run record; storage; values.
"""
