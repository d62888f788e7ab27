"""Block Kit for cards, modals, grants and the run's status message."""
