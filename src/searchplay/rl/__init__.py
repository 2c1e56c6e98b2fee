"""searchplay.rl."""
