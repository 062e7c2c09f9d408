"""Bar charts drawn on the server as inline SVG: no JavaScript library and no request to another host (the
admin's pages load nothing from outside). Each chart names itself (<title>, <desc> listing every value) and
writes every value as text beside its bar, so a screen reader and a reader of the printed page get the
numbers, not only the shapes."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from itertools import count

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

_LABEL_WIDTH = 150
_BAR_WIDTH = 220
_VALUE_WIDTH = 90
_ROW_HEIGHT = 22
_ids = count(1)


def bar_chart(*, title: str, rows: Sequence[tuple[str, Decimal | int]], unit: str = "") -> SafeString:
    """A horizontal bar per (label, value), longest for the largest value; values below zero draw no bar."""
    chart_id = f"chart-{next(_ids)}"
    width = _LABEL_WIDTH + _BAR_WIDTH + _VALUE_WIDTH
    height = max(1, len(rows)) * _ROW_HEIGHT + 4
    largest = max((value for _, value in rows), default=0) or 1
    described = "; ".join(f"{label}: {value}{unit}" for label, value in rows) or "No values."
    bars = format_html_join(
        "",
        '<g class="bar"><text x="{}" y="{}" text-anchor="end">{}</text>'
        '<rect x="{}" y="{}" width="{}" height="{}" rx="2"></rect>'
        '<text x="{}" y="{}" class="value">{}{}</text></g>',
        (
            (
                _LABEL_WIDTH - 6,
                index * _ROW_HEIGHT + 15,
                label,
                _LABEL_WIDTH,
                index * _ROW_HEIGHT + 4,
                round(_BAR_WIDTH * max(Decimal(value), Decimal(0)) / Decimal(largest), 1),
                _ROW_HEIGHT - 6,
                _LABEL_WIDTH + 6 + round(_BAR_WIDTH * max(Decimal(value), Decimal(0)) / Decimal(largest), 1),
                index * _ROW_HEIGHT + 15,
                value,
                unit,
            )
            for index, (label, value) in enumerate(rows)
        ),
    )
    return format_html(
        '<svg class="dashboard-chart" role="img" viewBox="0 0 {} {}" width="{}" height="{}" '
        'aria-labelledby="{}-title {}-desc" xmlns="http://www.w3.org/2000/svg">'
        '<title id="{}-title">{}</title><desc id="{}-desc">{}</desc>{}</svg>',
        width,
        height,
        width,
        height,
        chart_id,
        chart_id,
        chart_id,
        title,
        chart_id,
        described,
        bars,
    )
