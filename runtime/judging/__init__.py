"""The language a rule judges a call in: arguments as the tool gets them, their schemas, and
the bounded comparisons and evaluation a `when` runs on (`runtime.conditions`).

Floor 4 (rules): imports the floors below (the record, storage, values).
"""

from runtime.judging.arguments import ArgumentSchema, JudgedArguments

__all__ = [
    "ArgumentSchema",
    "JudgedArguments",
]
