"""Tools from MCP servers: connections, listings and where a pending call comes from.

Floor 6 (a run): imports `runtime.registry` beside it, and the floors below.
"""

from runtime.mcp.asking import McpQuestions, QuestionNotices
from runtime.mcp.listing import McpListings
from runtime.mcp.questions import (
    ACTIONS,
    QUESTION_ID_PATTERN,
    Action,
    PostedMessage,
    Question,
    QuestionStore,
    StoredQuestion,
)

__all__ = [
    "ACTIONS",
    "QUESTION_ID_PATTERN",
    "Action",
    "McpListings",
    "McpQuestions",
    "PostedMessage",
    "Question",
    "QuestionNotices",
    "QuestionStore",
    "StoredQuestion",
]
