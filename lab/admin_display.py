"""How the staff's lab pages show a result and a clock: values as reported, flags as flags (L and H in bold,
a critical LL or HH in red with the word, since LL alone reads like N at a glance), the acknowledgement of a
critical value in the branch's time, and waiting times in words."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from lab.models import CRITICAL_FLAGS, LabResult
from lab.representations import plain_quantity


def result_value(result: LabResult) -> str:
    """As reported (13.5, not the column's 13.5000), as the API and the printed report show it."""
    if result.value_quantity is None:
        return result.value_text
    high = result.value_quantity_high
    shown = f"{result.comparator}{plain_quantity(result.value_quantity)}"
    return shown if high is None else f"{shown}-{plain_quantity(high)}"


def band(low: Decimal | None, high: Decimal | None) -> str:
    low, high = plain_quantity(low), plain_quantity(high)
    if low is None and high is None:
        return ""
    return f"{'' if low is None else low}-{'' if high is None else high}"


def result_limits(result: LabResult) -> str:
    return band(result.reference_low, result.reference_high)


def flag_html(flag: str) -> SafeString | str:
    if flag in CRITICAL_FLAGS:
        return format_html('<strong class="critical" style="color:#ba2121">{} (critical)</strong>', flag)
    if flag in {"L", "H"}:
        return format_html("<strong>{}</strong>", flag)
    return flag


def local_moment(moment: datetime, zone: ZoneInfo) -> str:
    return f"{timezone.localtime(moment, zone):%d %b %Y %H:%M}"


def acknowledgement(result: LabResult, zone: ZoneInfo) -> str:
    """`by staff:asha on 28 Nov 2026 21:30: Dr Rao by phone, read back` (the note after a colon, when there is
    one), "not yet" for a critical value nobody acknowledged, else ""."""
    if result.critical_acknowledged_at is not None:
        said = f"by {result.critical_acknowledged_by} on {local_moment(result.critical_acknowledged_at, zone)}"
        return f"{said}: {result.critical_acknowledgement_note}" if result.critical_acknowledgement_note else said
    return "not yet" if result.flag in CRITICAL_FLAGS else ""


def duration_words(elapsed: timedelta) -> str:
    """2 h 15 min, 45 min, 3 d 4 h (whole minutes, never negative)."""
    minutes = max(0, int(elapsed.total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min"
