"""searchplay.eval."""
