"""A proposed policy, reviewed before deploying it: its backtest and its check."""
