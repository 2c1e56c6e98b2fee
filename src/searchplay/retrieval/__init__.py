"""searchplay.retrieval."""
