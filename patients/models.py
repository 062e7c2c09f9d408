"""Models of the patients app (built in its own issue)."""
