"""Running a run's steps with the SDK: planning approvals, applying decisions, observing, ending."""
