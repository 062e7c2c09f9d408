"""Models of the billing app (built in its own issue)."""
