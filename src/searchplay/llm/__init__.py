"""searchplay.llm."""
