"""searchplay.selfplay."""
