"""searchplay.kg."""
