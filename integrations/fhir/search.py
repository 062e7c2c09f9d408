"""FHIR search parameters -> SQL filters (Q objects on the resource's rows), with FHIR semantics.

- `date` values have a precision (2026, 2026-03, 2026-03-02, or a time with its offset, which FHIR
  requires once hours are given): each is the range [lo, hi) of instants it covers; a date alone is a day
  of the service's time zone (TIME_ZONE). Prefixes on a point-valued element (every date we search is
  one): eq lo<=v<hi, ne not that, lt and eb v<lo, le v<hi, gt and sa v>=hi, ge v>=lo, ap within 10% of the
  distance from now (at least the value's own range).
- `token` values are `code`, `system|code`, `|code` or `system|`; `reference` values `Patient/<id>`,
  `<id>` or an absolute URL ending so.
- A comma separates alternatives (OR); a parameter repeated is a conjunction (AND).
- Everything is a WHERE on an indexed column: nothing is filtered in Python.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Q

from integrations.fhir.outcome import FhirError
from patients.selectors import Span

# ASCII digits only ([0-9], not \d, which matches other scripts' digits too).
_DATE = re.compile(
    r"^(?P<prefix>eq|ne|lt|gt|le|ge|sa|eb|ap)?"
    r"(?P<year>[0-9]{4})(?:-(?P<month>[0-9]{2})(?:-(?P<day>[0-9]{2})"
    r"(?:T(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})(?::(?P<second>[0-9]{2})(?P<fraction>\.[0-9]{1,6})?)?"
    r"(?P<zone>Z|[+-][0-9]{2}:[0-9]{2}))?)?)?$"
)
_ID = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")

Filter = Callable[[str, str], Q]  # (value, modifier) -> Q


@dataclass(frozen=True)
class DateRange:
    prefix: str
    lo: datetime
    hi: datetime
    is_date: bool  # no time part: the day(s) of the service's time zone


def bad(name: str, message: str) -> FhirError:
    return FhirError(400, f"Search parameter {name}: {message}", expression=[name])


def parse_date(name: str, raw: str) -> DateRange:
    match = _DATE.match(raw)
    if match is None:
        raise bad(name, f"{raw!r} is not a FHIR date or dateTime with an optional prefix (eq ne lt gt le ge sa eb ap).")
    parts = {key: value for key, value in match.groupdict().items() if value is not None}
    if "hour" in parts and "zone" not in parts:
        raise bad(name, "a time needs its UTC offset (Z or +05:30).")
    try:
        year, month, day = int(parts["year"]), int(parts.get("month", 1)), int(parts.get("day", 1))
        if "hour" in parts:
            zone = UTC if parts["zone"] == "Z" else datetime.strptime(parts["zone"].replace(":", ""), "%z").tzinfo
            fraction = parts.get("fraction", "")
            micro = int((fraction[1:] + "000000")[:6]) if fraction else 0
            lo = datetime(
                year,
                month,
                day,
                int(parts["hour"]),
                int(parts["minute"]),
                int(parts.get("second", 0)),
                micro,
                tzinfo=zone,
            )
            step = (
                timedelta(microseconds=1)
                if fraction
                else timedelta(seconds=1)
                if "second" in parts
                else timedelta(minutes=1)
            )
            hi = lo + step
        else:
            local = ZoneInfo(settings.TIME_ZONE)
            start = date(year, month, day)
            if "day" in parts:
                end = start + timedelta(days=1)
            elif "month" in parts:
                end = date(year + (month == 12), month % 12 + 1, 1)
            else:
                end = date(year + 1, 1, 1)
            lo = datetime(start.year, start.month, start.day, tzinfo=local)
            hi = datetime(end.year, end.month, end.day, tzinfo=local)
    except (ValueError, OverflowError):
        raise bad(name, f"{raw!r} is not a valid date.") from None
    return DateRange(prefix=parts.get("prefix", "eq"), lo=lo, hi=hi, is_date="hour" not in parts)


def span(value: DateRange, lo: datetime | date, hi: datetime | date, margin: timedelta = timedelta(0)) -> Span:
    """The span of a point-valued column that a prefixed date asks for (the module's docstring)."""
    prefix = value.prefix
    if prefix == "eq":
        return Span(lo, hi)
    if prefix == "ne":
        return Span(lo, hi, outside=True)
    if prefix in ("lt", "eb"):
        return Span(end=lo)
    if prefix == "le":
        return Span(end=hi)
    if prefix in ("gt", "sa"):
        return Span(start=hi)
    if prefix == "ap":
        return Span(lo - margin, hi + margin)
    return Span(start=lo)  # ge


def date_where(where: Callable[[Span], Q], *, date_only: bool = False) -> Filter:
    """A `date` parameter: the owning selector's condition for the span asked (`date_only`: a date column,
    such as date_of_birth, which takes a date without a time)."""

    def build(raw: str, name: str) -> Q:
        value = parse_date(name, raw)
        margin = abs(datetime.now(UTC) - value.lo) / 10 if value.prefix == "ap" else timedelta(0)
        if not date_only:
            return where(span(value, value.lo, value.hi, margin))
        if not value.is_date:
            raise bad(name, "takes a date without a time.")
        return where(span(value, value.lo.date(), value.hi.date(), timedelta(days=margin.days)))

    return build


def date_filter(field: str, *, date_only: bool = False) -> Filter:
    """A `date` parameter on a column of the searched rows themselves."""
    return date_where(lambda asked: asked.on(field), date_only=date_only)


def token(raw: str) -> tuple[str | None, str]:
    """(system or None when not given, code): `a|b` -> ("a", "b"); `|b` -> ("", "b"); `b` -> (None, "b")."""
    if "|" in raw:
        system_part, _, code = raw.partition("|")
        return system_part, code
    return None, raw


def reference_id(raw: str, target: str) -> str | None:
    """The id of a reference to `target` (`Patient/<id>`, `<id>`, `http://.../Patient/<id>`), None when it
    names another type or no valid id (which matches nothing)."""
    text = raw.rstrip("/")
    if "/" in text:
        resource_type, _, key = text.rpartition("/")
        if resource_type.rpartition("/")[2] != target:
            return None
    else:
        key = text
    return key if _ID.match(key) else None


def uuid_or_none(key: str | None) -> uuid.UUID | None:
    if key is None:
        return None
    try:
        return uuid.UUID(key)
    except ValueError:
        return None


def _equals(field: str) -> Callable[[Any], Q]:
    return lambda value: Q(**{field: value})


def reference_where(target: str, where: Callable[[uuid.UUID], Q]) -> Filter:
    """A reference to one of our rows by id (a UUID): the owning selector's condition for that id; anything
    else matches nothing."""

    def build(raw: str, name: str) -> Q:
        key = uuid_or_none(reference_id(raw, target))
        return where(key) if key is not None else Q(pk__in=[])

    return build


def reference_filter(field: str, target: str) -> Filter:
    return reference_where(target, _equals(field))


def id_where(where: Callable[[uuid.UUID], Q]) -> Filter:
    def build(raw: str, name: str) -> Q:
        key = uuid_or_none(raw)
        return where(key) if key is not None else Q(pk__in=[])

    return build


def id_filter(field: str = "pk") -> Filter:
    return id_where(_equals(field))


def token_parts(name: str, raw: str) -> tuple[str | None, str]:
    """`token`, refusing `|` alone (neither a system nor a code: a mistake, not "everything")."""
    system_part, code = token(raw)
    if system_part == "" and not code:
        raise bad(name, "a token needs a code, a system or both (system|code, system|, |code).")
    return system_part, code


def code_where(
    where: Callable[[str], Q],
    systems: tuple[str, ...],
    mapping: Mapping[str, str] | None = None,
    *,
    in_system: Q | None = None,
) -> Filter:
    """A token on codes the server always emits under one of `systems`: `code` the code in any of them
    (mapped to ours when `mapping` is given; `where` is the owning selector's condition for one of our
    codes); `system|code` the code, when the system is one of ours (else nothing); `system|` every row
    coded in that system (`in_system`, or every row); `|code` a code without a system, which no row of ours
    has: nothing."""

    def build(raw: str, name: str) -> Q:
        system_part, code = token_parts(name, raw)
        if system_part == "" or (system_part is not None and system_part not in systems):
            return Q(pk__in=[])
        if not code:
            return in_system if in_system is not None else Q()
        if mapping is not None:
            ours = mapping.get(code)
            return where(ours) if ours is not None else Q(pk__in=[])
        return where(code)

    return build


def code_filter(
    field: str, systems: tuple[str, ...], mapping: Mapping[str, str] | None = None, *, in_system: Q | None = None
) -> Filter:
    """A token on a column of the searched rows themselves (code_where)."""
    return code_where(_equals(field), systems, mapping, in_system=in_system)


@dataclass(frozen=True)
class SearchParam:
    build: Callable[[str, str], Q]  # (value, parameter name) -> Q
    type: str  # the CapabilityStatement's SearchParamType: date, token, reference, string
    documentation: str
    modifiers: tuple[str, ...] = ()
