"""searchplay.agent."""
