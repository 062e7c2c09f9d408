"""Which query parameters an operation declares (and so accepts, and documents)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def declared_query_params(view: Any, method: str) -> tuple[type[serializers.Serializer], ...]:
    """The serializers of the operation's query parameters: a ViewSet keys `query_params` by action, a
    plain view by method. HEAD takes GET's parameters."""
    declared: dict[str, tuple[type[serializers.Serializer], ...]] = getattr(view, "query_params", {})
    action = getattr(view, "action", None)
    if action and action in declared:
        return declared[action]
    return declared.get("GET" if method == "HEAD" else method, ())
