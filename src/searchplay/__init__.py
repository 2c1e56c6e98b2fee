"""searchplay."""
