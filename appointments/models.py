"""Models of the appointments app (built in its own issue)."""
