"""The record's query parameters."""

from __future__ import annotations

from rest_framework import serializers

from emr.selectors import SECTIONS


class RecordParams(serializers.Serializer):
    section = serializers.ChoiceField(
        choices=SECTIONS,
        required=False,
        help_text="Only this section (to page through one long history); every section when absent.",
    )
