"""searchplay.rewards."""
