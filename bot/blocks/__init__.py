"""Block Kit for cards, modals, grants and the run's status message.

Floor of its own above the bottom: imports `bot.words`.
"""
