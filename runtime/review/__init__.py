"""The audit trail reviewed: a proposed policy's backtest and check, and how decisions go."""
