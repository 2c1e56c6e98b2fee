"""searchplay.quality."""
