"""Exactly once: every tool call runs through the journal, which records its outcome (its start
mark and the model's turns are fields of the run record), for every tool kind.

Floor 5 (a call's actions): imports `decisions` beside it, and the floors below.
"""
