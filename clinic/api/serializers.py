"""Serializer base classes shared by every app's API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Rejects body fields it does not know (400 per unknown field): a typo must not silently do nothing.

    Nested StrictSerializers apply the rule at every level, so `address.pincod` is named as unknown.
    """

    def to_internal_value(self, data: Any) -> Any:
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = {key: ["Unknown field."] for key in data if key not in writable}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                exc.detail.update(_coded(unknown))
            raise
        if unknown:
            raise serializers.ValidationError(_coded(unknown))
        return value


def _coded(unknown: dict[str, list[str]]) -> dict[str, Any]:
    return {key: [serializers.ErrorDetail(msg, code="unknown_field") for msg in msgs] for key, msgs in unknown.items()}


class OffsetDateTimeField(serializers.DateTimeField):
    """An ISO 8601 datetime that must carry its UTC offset: a bare local time is ambiguous across branches."""

    default_error_messages = {"naive": "Include the UTC offset, e.g. 2026-11-23T09:00:00+05:30."}

    def to_internal_value(self, value: Any) -> Any:
        try:
            parsed = parse_datetime(value) if isinstance(value, str) else None
        except ValueError:
            # Well formed but impossible (Feb 30, hour 25, offset +25:00): the parent reports it as invalid.
            parsed = None
        if parsed is not None and parsed.tzinfo is None:
            self.fail("naive")
        return super().to_internal_value(value)
