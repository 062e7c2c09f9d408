"""Checking a posted result value and flagging it (docs/api-rules.md §13). Pure functions: no database reads
or writes; they take model instances (saved or not) or any object with the same attributes.

The result-posting service calls, for each `{"test", "analyte", "value", "unit"?}`:

    parsed = parse_value(analyte, raw_value, raw_unit)          # ResultValueError -> a 400 naming the field
    result = interpretation_for(analyte, parsed, ranges=analyte.ranges.all(), sex=patient.gender,
                                age_days=age_in_days(patient.date_of_birth, collected_on))

and stores parsed.quantity / parsed.text / parsed.unit and result.flag / reference_low / reference_high.

Decisions:

- Numbers. The API's JSON parser (clinic.api.parsers) reads a number with a fraction or an exponent as a
  Decimal (never a float) and refuses NaN and Infinity; a whole number arrives as an int. Both are
  accepted, as is a numeric string of ASCII digits with at most one '.' ("12.5"; not "12,5", ".5", "1e3",
  "+1", " 12"). A float (only from a caller inside the process) is accepted when finite, through str().
  Quantities are never negative here (no analyte of the catalogue measures a signed quantity), so a
  negative value is refused; -0 is 0. The value must fit the stored column, Decimal(14, 4): at most ten
  integer digits and four decimal places. Trailing zeros do not count as places ("12.50000" is 12.5).
- Units. Omitted (null or absent): the analyte's unit is stored. Sent: it must be the analyte's UCUM unit
  as written, or the same UCUM unit in one of the spellings UCUM itself or instruments commonly use: the
  litre as "l" or "L" ("mg/dl" is "mg/dL"), micro as "u", "µ" or "μ", and "10^3" for "10*3". UCUM is
  case-sensitive otherwise ("G/DL" is not "g/dL", "MG/DL" is not "mg/dL"): refused, the message naming the
  expected unit. An empty string is a unit sent, and wrong. Text and coded results have no unit: any unit
  sent with one is refused.
- Text (text analytes and imaging reports): a string, not blank, at most 20,000 characters once its
  surrounding whitespace is stripped (the stored value is stripped). Tabs and line breaks are allowed
  (reports have paragraphs); every other control character (C0, DEL and C1) is refused.
- Coded: one of the analyte's coded values. An exact match, or failing that a case-insensitive one
  (surrounding whitespace ignored) when exactly one coded value matches so: the canonical spelling is
  stored ("positive" -> "Positive").
- Reference range: the band for the patient's sex (`male`, `female`) covering the age in days at
  collection, [age_min_days, age_max_days), preferred over an `any` band; patients whose gender is
  `other` or `unknown` get `any` bands only. No band: no range.
- Flags: LL when the value is strictly below critical_low, HH when strictly above critical_high (a value
  equal to a critical limit is not critical, as "critical: < 2.5 mmol/L" reads); otherwise L strictly
  below the range's low, H strictly above its high, N within [low, high] (limits inclusive). A value
  within the critical limits with no range to compare it with gets no flag (""), as do text and coded
  results.
- Bounded quantities (HL7 SN, docs/hl7-inbound.md): `>14`, `<=3` or a range 10..20 (parse_bounded) are
  flagged only when the flag holds for every value they stand for (interpret_bounded): a lab reporting
  `>14` where the high is 13 gets H, where the high is 15.5 gets no flag.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from lab.models import Flag, RangeSex, ValueType

MAX_TEXT_LENGTH = 20_000
QUANTITY_DECIMAL_PLACES = 4
QUANTITY_INTEGER_DIGITS = 10  # LabResult.value_quantity: max_digits 14, decimal_places 4
_QUANTITY_LIMIT = Decimal(10) ** QUANTITY_INTEGER_DIGITS
_FOUR_PLACES = Decimal(1).scaleb(-QUANTITY_DECIMAL_PLACES)
_MAX_NUMERIC_STRING = 40  # longer strings cannot fit the column whatever they hold
_NUMERIC_STRING = re.compile(r"[0-9]+(?:\.[0-9]+)?")
# C0 controls but tab, line feed and carriage return; DEL; C1 controls.
_TEXT_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_MICRO = re.compile("[\u00b5\u03bc]")
# A litre atom written "l", alone or after a metric prefix, not inside another atom ("mol", "cell").
_LITRE = re.compile(r"(?<![A-Za-z])([dcmunpf]?)l(?![A-Za-z])")


class ResultValueError(ValueError):
    """A posted value or unit the analyte cannot take. `field` is "value" or "unit"; the service names
    the result it belongs to (e.g. `results.2.unit`) in the 400 it answers with."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class AnalyteLike(Protocol):
    @property
    def value_type(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def coded_values(self) -> Sequence[str]: ...
    @property
    def critical_low(self) -> Decimal | None: ...
    @property
    def critical_high(self) -> Decimal | None: ...


class RangeLike(Protocol):
    @property
    def sex(self) -> str: ...
    @property
    def age_min_days(self) -> int: ...
    @property
    def age_max_days(self) -> int | None: ...
    @property
    def low(self) -> Decimal | None: ...
    @property
    def high(self) -> Decimal | None: ...


@dataclass(frozen=True)
class ParsedValue:
    """What to store: a quantity (with its unit) or a text (text, coded, imaging report; unit ""). A quantity
    may be bounded (an HL7 SN value, docs/hl7-inbound.md): `comparator` "<", "<=", ">" or ">=" before it, or
    `high` closing the range quantity..high."""

    quantity: Decimal | None
    text: str
    unit: str
    comparator: str = ""
    high: Decimal | None = None


@dataclass(frozen=True)
class Interpretation:
    """The flag ("" for none) and the range it was read against (stored with the result)."""

    flag: str
    reference_low: Decimal | None
    reference_high: Decimal | None


R = TypeVar("R", bound=RangeLike)


# -- values -----------------------------------------------------------------------------------------------


def parse_value(analyte: AnalyteLike | None, raw: Any, unit: Any = None) -> ParsedValue:
    """The posted value (and unit) checked against the analyte's value type and unit; `analyte` None is an
    imaging report (a text). ResultValueError names the field ("value" or "unit") and why."""
    value_type = ValueType.TEXT if analyte is None else analyte.value_type
    if value_type == ValueType.QUANTITY:
        assert analyte is not None  # value_type comes from it
        quantity = parse_quantity(raw)
        return ParsedValue(quantity=quantity, text="", unit=check_unit(analyte.unit, unit))
    if unit is not None:
        raise ResultValueError("unit", f"A {value_type} result has no unit; send none.")
    if value_type == ValueType.CODED:
        assert analyte is not None
        return ParsedValue(quantity=None, text=parse_coded(analyte.coded_values, raw), unit="")
    if value_type == ValueType.TEXT:
        return ParsedValue(quantity=None, text=parse_text(raw), unit="")
    raise ValueError(f"Unknown value type {value_type!r}.")


COMPARATORS = ("<", "<=", ">", ">=")


def parse_bounded(analyte: AnalyteLike | None, raw: Any, unit: Any, *, comparator: str, high: Any) -> ParsedValue:
    """A quantity with a comparator (`>14`) or a range (10 to 20), as an HL7 SN value carries it: only a
    quantity analyte takes one; the range's high is not below its low, and a range has no comparator."""
    if analyte is None or analyte.value_type != ValueType.QUANTITY:
        raise ResultValueError("value", "Only a quantity takes a comparator or a range; send the value as text.")
    if comparator and comparator not in COMPARATORS:
        raise ResultValueError("value", f"The comparator must be one of {', '.join(COMPARATORS)}, not {comparator!r}.")
    low = parse_quantity(raw)
    top = None if high is None else parse_quantity(high)
    if top is not None and comparator:
        raise ResultValueError("value", "A range (low to high) takes no comparator.")
    if top is not None and top < low:
        raise ResultValueError("value", f"The range's high ({top}) is below its low ({low}).")
    return ParsedValue(quantity=low, text="", unit=check_unit(analyte.unit, unit), comparator=comparator, high=top)


def parse_quantity(raw: Any) -> Decimal:
    """A non-negative Decimal fitting Decimal(14, 4), from an int, a Decimal (the JSON parser's numbers),
    a finite float or a plain numeric string (see the module docstring)."""
    shape = "The value must be a number (a JSON number, or a string of ASCII digits with at most one '.'), e.g. 13.5."
    if isinstance(raw, bool):
        raise ResultValueError("value", shape)
    if isinstance(raw, int):
        value = Decimal(raw)
    elif isinstance(raw, Decimal):
        value = raw
    elif isinstance(raw, float):
        value = Decimal(str(raw))  # str(): the shortest decimal that reads back as the float, 0.1 not 0.1000…
    elif isinstance(raw, str):
        if len(raw) > _MAX_NUMERIC_STRING or not _NUMERIC_STRING.fullmatch(raw):
            raise ResultValueError("value", shape)
        value = Decimal(raw)
    else:
        raise ResultValueError("value", shape)
    if not value.is_finite():
        raise ResultValueError("value", shape)
    if value < 0:
        raise ResultValueError("value", "The value must not be negative.")
    value = value.copy_abs()  # -0 is 0 (copy_abs, unlike abs(), does not round in the context)
    if value >= _QUANTITY_LIMIT:
        raise ResultValueError(
            "value", f"The value must be below {_QUANTITY_LIMIT:,.0f} (at most {QUANTITY_INTEGER_DIGITS} digits)."
        )
    # Below the limit, four places take at most 14 digits: quantize cannot overflow the context's 28.
    if value != value.quantize(_FOUR_PLACES):
        raise ResultValueError("value", f"The value must have at most {QUANTITY_DECIMAL_PLACES} decimal places.")
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # a finite value
    if exponent > 0 or exponent < -QUANTITY_DECIMAL_PLACES:
        # 1E+2 -> 100; 12.50000 -> 12.5000: the value written as the column holds it.
        value = value.quantize(Decimal(1) if exponent > 0 else _FOUR_PLACES)
    return value


def ucum_spelling(unit: str) -> str:
    """The unit with the equivalent spellings accepted made canonical: micro as "u", the litre as "L",
    powers of ten as "10*" (UCUM's own case-sensitive form; no other case folding)."""
    unit = _MICRO.sub("u", unit).replace("10^", "10*")
    return _LITRE.sub(r"\1L", unit)


def check_unit(expected: str, sent: Any) -> str:
    """The unit to store for a quantity: the analyte's, when none is sent or the one sent is the same UCUM
    unit; ResultValueError("unit", ...) otherwise."""
    if sent is None:
        return expected
    if not isinstance(sent, str):
        raise ResultValueError("unit", f"The unit must be a string: {expected} (UCUM).")
    if sent != expected and ucum_spelling(sent) != ucum_spelling(expected):
        shown = sent if len(sent) <= 40 and not _TEXT_CONTROL_CHARACTERS.search(sent) else f"{sent[:40]!r}…"
        raise ResultValueError("unit", f"The unit must be {expected} (UCUM, case-sensitive), not {shown}.")
    return expected


def parse_text(raw: Any) -> str:
    """A text result or report: a non-blank string of at most MAX_TEXT_LENGTH characters once stripped,
    without control characters other than tab and line breaks."""
    if not isinstance(raw, str):
        raise ResultValueError("value", "The value must be a text (a JSON string).")
    text = raw.strip()
    if not text:
        raise ResultValueError("value", "The value must not be blank.")
    if len(text) > MAX_TEXT_LENGTH:
        raise ResultValueError("value", f"The value must have at most {MAX_TEXT_LENGTH:,} characters.")
    if _TEXT_CONTROL_CHARACTERS.search(text):
        raise ResultValueError("value", "The value must not contain control characters (tab and line breaks only).")
    return text


def parse_coded(coded_values: Sequence[str], raw: Any) -> str:
    """One of the coded values, in its canonical spelling: an exact match, else the single one that
    matches ignoring case and surrounding whitespace."""
    allowed = ", ".join(coded_values)
    if not isinstance(raw, str):
        raise ResultValueError("value", f"The value must be one of: {allowed}.")
    if raw in coded_values:
        return raw
    folded = raw.strip().casefold()
    matches = [code for code in coded_values if code.casefold() == folded]
    if len(matches) != 1:
        raise ResultValueError("value", f"The value must be one of: {allowed}.")
    return matches[0]


# -- ranges and flags ---------------------------------------------------------------------------------------


def age_in_days(date_of_birth: date, at: date) -> int:
    """Whole days from birth to `at` (the collection's local date): 0 on the day of birth, 365 on the
    first birthday of a year of 365 days. `at` must be a date, not a datetime (which day it is depends on
    the time zone: the caller decides). ValueError when `at` is before the birth."""
    if isinstance(at, datetime) or isinstance(date_of_birth, datetime):
        raise TypeError("age_in_days takes dates; convert a datetime to the clinic's local date first.")
    days = (at - date_of_birth).days
    if days < 0:
        raise ValueError(f"{at.isoformat()} is before the date of birth {date_of_birth.isoformat()}.")
    return days


def _covers(band: RangeLike, age_days: int) -> bool:
    return band.age_min_days <= age_days and (band.age_max_days is None or age_days < band.age_max_days)


def reference_range_for(ranges: Iterable[R], *, sex: str, age_days: int) -> R | None:
    """The band for a patient of this gender (male, female, other, unknown) and age in days: one of the
    patient's own sex covering the age, else an `any` band covering it, else None. Bands of one sex do not
    overlap (a database constraint); should they, the one starting latest wins."""
    covering = [band for band in ranges if _covers(band, age_days)]
    wanted = [sex, RangeSex.ANY] if sex in (RangeSex.MALE, RangeSex.FEMALE) else [RangeSex.ANY]
    for band_sex in wanted:
        bands = [band for band in covering if band.sex == band_sex]
        if bands:
            return max(bands, key=lambda band: band.age_min_days)
    return None


def interpret(
    value: Decimal, *, range: RangeLike | None, critical_low: Decimal | None, critical_high: Decimal | None
) -> str:
    """The flag of a quantity: LL / HH past a critical limit (strictly), else L / H outside the range
    (strictly), else N; "" when there is no range and no critical limit is passed."""
    if critical_low is not None and value < critical_low:
        return Flag.CRITICAL_LOW.value
    if critical_high is not None and value > critical_high:
        return Flag.CRITICAL_HIGH.value
    if range is None:
        return ""
    if range.low is not None and value < range.low:
        return Flag.LOW.value
    if range.high is not None and value > range.high:
        return Flag.HIGH.value
    return Flag.NORMAL.value


def interpret_bounded(
    value: ParsedValue, *, range: RangeLike | None, critical_low: Decimal | None, critical_high: Decimal | None
) -> str:
    """The flag of a bounded quantity, only where every value it stands for gets it: `>14` against a high of
    13 is H (and HH only when 14 is past the critical high too: a flag is never raised on a guess); `<0.5`
    against a low of 1 is L; a range 10..20 gets the flag both ends share. Anything else is "" (no flag),
    as a laboratory's own `>` reading is inconclusive about where within the range the value lies."""
    assert value.quantity is not None
    limits = {"critical_low": critical_low, "critical_high": critical_high}
    if value.high is not None:
        low_flag = interpret(value.quantity, range=range, **limits)
        return low_flag if low_flag == interpret(value.high, range=range, **limits) else ""
    bound, strict = value.quantity, value.comparator in ("<", ">")
    if value.comparator in (">", ">="):

        def above(limit: Decimal | None) -> bool:
            return limit is not None and (bound >= limit if strict else bound > limit)

        if above(critical_high):
            return Flag.CRITICAL_HIGH.value
        return Flag.HIGH.value if range is not None and above(range.high) else ""

    def below(limit: Decimal | None) -> bool:
        return limit is not None and (bound <= limit if strict else bound < limit)

    if below(critical_low):
        return Flag.CRITICAL_LOW.value
    return Flag.LOW.value if range is not None and below(range.low) else ""


def interpretation_for(
    analyte: AnalyteLike | None, parsed: ParsedValue, *, ranges: Iterable[RangeLike], sex: str, age_days: int
) -> Interpretation:
    """The flag and reference limits to store with a parsed result: text, coded and imaging results get
    none."""
    if analyte is None or parsed.quantity is None:
        return Interpretation(flag="", reference_low=None, reference_high=None)
    band = reference_range_for(ranges, sex=sex, age_days=age_days)
    limits = {"critical_low": analyte.critical_low, "critical_high": analyte.critical_high}
    if parsed.comparator or parsed.high is not None:
        flag = interpret_bounded(parsed, range=band, **limits)
    else:
        flag = interpret(parsed.quantity, range=band, **limits)
    return Interpretation(
        flag=flag,
        reference_low=band.low if band is not None else None,
        reference_high=band.high if band is not None else None,
    )
