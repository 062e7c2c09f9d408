"""lab.interpretation: checking posted result values and units, choosing the reference band, flagging.
Pure functions over unsaved model instances: no database."""

from __future__ import annotations

import io
import itertools
import random
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from clinic.api.parsers import JSONParser
from lab.interpretation import (
    MAX_TEXT_LENGTH,
    Interpretation,
    ParsedValue,
    ResultValueError,
    age_in_days,
    interpret,
    interpretation_for,
    parse_value,
    reference_range_for,
    ucum_spelling,
)
from lab.models import Analyte, ReferenceRange

SHAPE = "The value must be a number (a JSON number, or a string of ASCII digits with at most one '.'), e.g. 13.5."
NEGATIVE = "The value must not be negative."
TOO_BIG = "The value must be below 10,000,000,000 (at most 10 digits)."
TOO_PRECISE = "The value must have at most 4 decimal places."


def quantity(unit: str = "g/dL", low: str | None = None, high: str | None = None) -> Analyte:
    return Analyte(
        code="HGB",
        unit=unit,
        value_type="quantity",
        critical_low=Decimal(low) if low else None,
        critical_high=Decimal(high) if high else None,
    )


def text_analyte() -> Analyte:
    return Analyte(code="COLOR", value_type="text")


def coded(*values: str) -> Analyte:
    return Analyte(code="HCG", value_type="coded", coded_values=list(values))


def band(sex: str, start: int, end: int | None, low: str | None = "12", high: str | None = "16") -> ReferenceRange:
    return ReferenceRange(
        sex=sex,
        age_min_days=start,
        age_max_days=end,
        low=Decimal(low) if low is not None else None,
        high=Decimal(high) if high is not None else None,
    )


def refused(analyte: Analyte | None, raw: Any, unit: Any = None) -> tuple[str, str]:
    with pytest.raises(ResultValueError) as caught:
        parse_value(analyte, raw, unit)
    return caught.value.field, caught.value.message


# -- quantities ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        (13, "13"),
        (0, "0"),
        (Decimal("13.5"), "13.5"),
        (Decimal("0.0001"), "0.0001"),
        (Decimal("9999999999.9999"), "9999999999.9999"),
        (9_999_999_999, "9999999999"),
        ("13.5", "13.5"),
        ("0", "0"),
        ("007", "7"),
        ("0.0001", "0.0001"),
        ("9999999999.9999", "9999999999.9999"),
        ("12.50000", "12.5000"),  # trailing zeros are not decimal places
        ("12.000000000", "12.0000"),
        (Decimal("1.5E+2"), "150"),  # a JSON number with an exponent, as the parser reads it
        (Decimal("1E+9"), "1000000000"),
        (Decimal("125E-3"), "0.125"),
        (Decimal("-0.0"), "0.0"),  # -0 is 0
        (13.5, "13.5"),  # a float (inside the process only) goes through str()
        (0.1, "0.1"),
    ],
)
def test_quantity_accepted(raw: Any, stored: str) -> None:
    parsed = parse_value(quantity(), raw, None)
    assert parsed == ParsedValue(quantity=Decimal(stored), text="", unit="g/dL")
    assert str(parsed.quantity) == stored
    assert parsed.quantity is not None
    assert not parsed.quantity.is_signed()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("12,5", SHAPE),
        ("NaN", SHAPE),
        ("nan", SHAPE),
        ("Infinity", SHAPE),
        ("-Infinity", SHAPE),
        ("inf", SHAPE),
        ("1e309", SHAPE),
        ("1E3", SHAPE),
        ("", SHAPE),
        (" ", SHAPE),
        (" 12", SHAPE),
        ("12 ", SHAPE),
        ("12\n", SHAPE),
        ("١٢", SHAPE),  # Arabic-Indic digits
        ("१२", SHAPE),  # Devanagari digits
        ("\uff11\uff12", SHAPE),  # fullwidth digits
        ("0x1A", SHAPE),
        ("+-1", SHAPE),
        ("+1", SHAPE),
        ("-1", SHAPE),
        ("-0", SHAPE),
        (".5", SHAPE),
        ("5.", SHAPE),
        ("1.2.3", SHAPE),
        ("1_000", SHAPE),
        ("1 000", SHAPE),
        ("13.5 g/dL", SHAPE),
        ("0" * 41, SHAPE),
        (True, SHAPE),
        (False, SHAPE),
        (None, SHAPE),
        ([13], SHAPE),
        ({"value": 13}, SHAPE),
        (Decimal("NaN"), SHAPE),
        (Decimal("sNaN"), SHAPE),
        (Decimal("Infinity"), SHAPE),
        (Decimal("-Infinity"), SHAPE),
        (float("nan"), SHAPE),
        (float("inf"), SHAPE),
        (float("-inf"), SHAPE),
        (-1, NEGATIVE),
        (Decimal("-0.0001"), NEGATIVE),
        (-0.5, NEGATIVE),
        ("12.34567", TOO_PRECISE),
        ("0.00001", TOO_PRECISE),
        (Decimal("1E-5"), TOO_PRECISE),
        (Decimal("0.123456789012345678901234567890123"), TOO_PRECISE),
        (1.23456, TOO_PRECISE),
        (Decimal("1E-999999999"), TOO_PRECISE),
        (Decimal("0." + "1" * 100), TOO_PRECISE),
        ("10000000000", TOO_BIG),
        ("9999999999.99999", TOO_PRECISE),
        ("99999999999.5", TOO_BIG),
        (10**10, TOO_BIG),
        (10**400, TOO_BIG),
        (Decimal("1E+309"), TOO_BIG),  # what the JSON parser makes of the number 1e309
        (Decimal("1E+999999999"), TOO_BIG),
        (1e300, TOO_BIG),
    ],
)
def test_quantity_refused(raw: Any, message: str) -> None:
    assert refused(quantity(), raw) == ("value", message)


def test_quantity_from_the_api_parser_is_a_decimal_never_a_float() -> None:
    body = JSONParser().parse(io.BytesIO(b'{"a": 13.5, "b": 13, "c": 1.5e2, "d": 1e309, "e": 0.1}'))
    assert body == {"a": Decimal("13.5"), "b": 13, "c": Decimal("1.5e2"), "d": Decimal("1e309"), "e": Decimal("0.1")}
    assert not any(isinstance(value, float) for value in body.values())
    analyte = quantity()
    assert parse_value(analyte, body["a"]).quantity == Decimal("13.5")
    assert parse_value(analyte, body["b"]).quantity == Decimal(13)
    assert parse_value(analyte, body["c"]).quantity == Decimal(150)
    assert parse_value(analyte, body["e"]).quantity == Decimal("0.1")
    assert refused(analyte, body["d"]) == ("value", TOO_BIG)


# -- units --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "sent"),
    [
        ("g/dL", None),
        ("g/dL", "g/dL"),
        ("g/dL", "g/dl"),  # UCUM's litre is "l" or "L"
        ("mg/dL", "mg/dl"),
        ("mmol/L", "mmol/l"),
        ("U/L", "U/l"),
        ("fL", "fl"),
        ("L", "l"),
        ("10*3/uL", "10*3/uL"),
        ("10*3/uL", "10^3/uL"),
        ("10*3/uL", "10*3/µL"),  # micro sign
        ("10*3/uL", "10*3/μL"),  # Greek mu
        ("10*3/uL", "10^3/µl"),
        ("10*6/uL", "10*6/ul"),
        ("ug/dL", "µg/dl"),
        ("%", "%"),
        ("mm[Hg]", "mm[Hg]"),
        ("ng/mL", "ng/ml"),
    ],
)
def test_unit_accepted_stores_the_analytes_spelling(expected: str, sent: str | None) -> None:
    assert parse_value(quantity(unit=expected), "1.5", sent) == ParsedValue(Decimal("1.5"), "", expected)


@pytest.mark.parametrize(
    ("expected", "sent"),
    [
        ("g/dL", "G/DL"),  # UCUM is case-sensitive
        ("g/dL", "G/dL"),
        ("g/dL", "g/DL"),
        ("mg/dL", "MG/DL"),
        ("mg/dL", "Mg/dL"),
        ("g/dL", "mg/dL"),  # another unit altogether
        ("g/dL", "g/L"),
        ("g/dL", "g/100mL"),
        ("g/dL", " g/dL"),
        ("g/dL", "g/dL "),
        ("g/dL", "gm/dL"),
        ("g/dL", ""),  # an empty unit is a unit sent
        ("mmol/L", "mmoL/L"),  # only the litre atom may change case, not "mol"
        ("mmol/L", "MMOL/L"),
        ("10*3/uL", "10*3/UL"),
        ("10*3/uL", "10^3/mL"),
        ("10*3/uL", "K/uL"),
        ("fL", "FL"),
        ("U/L", "u/L"),  # "u" is not the unit "U"
        ("U/L", "IU/L"),
    ],
)
def test_unit_refused_naming_the_expected_unit(expected: str, sent: str) -> None:
    assert refused(quantity(unit=expected), "1.5", sent) == (
        "unit",
        f"The unit must be {expected} (UCUM, case-sensitive), not {sent}.",
    )


@pytest.mark.parametrize("sent", [5, 1.5, True, ["g/dL"], {"unit": "g/dL"}])
def test_unit_not_a_string_refused(sent: Any) -> None:
    assert refused(quantity(), "1.5", sent) == ("unit", "The unit must be a string: g/dL (UCUM).")


def test_unit_refusal_message_shows_an_odd_unit_safely() -> None:
    assert refused(quantity(), "1.5", "g/dL\x1b[31m") == (
        "unit",
        r"The unit must be g/dL (UCUM, case-sensitive), not 'g/dL\x1b[31m'….",
    )
    field, message = refused(quantity(), "1.5", "x" * 500)
    assert field == "unit"
    assert message == f"The unit must be g/dL (UCUM, case-sensitive), not {'x' * 40!r}…."


def test_the_value_is_checked_before_the_unit() -> None:
    assert refused(quantity(), "abc", "G/DL") == ("value", SHAPE)


@pytest.mark.parametrize(
    ("analyte", "kind"), [(text_analyte(), "text"), (coded("Positive", "Negative"), "coded"), (None, "text")]
)
@pytest.mark.parametrize("unit", ["g/dL", "", 5])
def test_unit_sent_for_text_coded_or_report_refused(analyte: Analyte | None, kind: str, unit: Any) -> None:
    assert refused(analyte, "Positive", unit) == ("unit", f"A {kind} result has no unit; send none.")


def test_ucum_spelling() -> None:
    assert ucum_spelling("10^3/µl") == "10*3/uL"
    assert ucum_spelling("mmol/l") == "mmol/L"
    assert ucum_spelling("mol/l") == "mol/L"
    assert ucum_spelling("cells/ul") == "cells/uL"  # "cells" holds an "l" that is not a litre
    assert ucum_spelling("G/DL") == "G/DL"


# -- text and imaging reports ---------------------------------------------------------------------------


@pytest.mark.parametrize("analyte", [text_analyte(), None], ids=["text-analyte", "imaging-report"])
@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("Pale yellow", "Pale yellow"),
        ("  Pale yellow \n", "Pale yellow"),
        (
            "FINDINGS:\n\tNo acute abnormality.\r\nIMPRESSION: Normal.",
            "FINDINGS:\n\tNo acute abnormality.\r\nIMPRESSION: Normal.",
        ),
        ("मूत्र हल्का पीला", "मूत्र हल्का पीला"),
        ("12", "12"),
        ("x" * MAX_TEXT_LENGTH, "x" * MAX_TEXT_LENGTH),
        ("\n " + "x" * MAX_TEXT_LENGTH + " \n", "x" * MAX_TEXT_LENGTH),  # the length counts once stripped
    ],
)
def test_text_accepted(analyte: Analyte | None, raw: str, stored: str) -> None:
    assert parse_value(analyte, raw) == ParsedValue(quantity=None, text=stored, unit="")


@pytest.mark.parametrize("analyte", [text_analyte(), None], ids=["text-analyte", "imaging-report"])
@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "The value must not be blank."),
        ("   ", "The value must not be blank."),
        ("\n\t\r\n", "The value must not be blank."),
        ("x" * (MAX_TEXT_LENGTH + 1), "The value must have at most 20,000 characters."),
        ("a\x00b", "The value must not contain control characters (tab and line breaks only)."),
        ("a\x1bb", "The value must not contain control characters (tab and line breaks only)."),
        ("a\x07b", "The value must not contain control characters (tab and line breaks only)."),
        ("a\x0bb", "The value must not contain control characters (tab and line breaks only)."),
        ("a\x0cb", "The value must not contain control characters (tab and line breaks only)."),
        ("a\x7fb", "The value must not contain control characters (tab and line breaks only)."),
        ("a\x85b", "The value must not contain control characters (tab and line breaks only)."),
        ("a\x9fb", "The value must not contain control characters (tab and line breaks only)."),
        (12, "The value must be a text (a JSON string)."),
        (Decimal("1.5"), "The value must be a text (a JSON string)."),
        (None, "The value must be a text (a JSON string)."),
        (True, "The value must be a text (a JSON string)."),
        (["a"], "The value must be a text (a JSON string)."),
    ],
)
def test_text_refused(analyte: Analyte | None, raw: Any, message: str) -> None:
    assert refused(analyte, raw) == ("value", message)


# -- coded values -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("Positive", "Positive"),
        ("Negative", "Negative"),
        ("positive", "Positive"),  # case-insensitive: the canonical spelling is stored
        ("NEGATIVE", "Negative"),
        (" Negative ", "Negative"),
        ("Indeterminate", "Indeterminate"),
    ],
)
def test_coded_accepted(raw: str, stored: str) -> None:
    assert parse_value(coded("Positive", "Negative", "Indeterminate"), raw) == ParsedValue(None, stored, "")


@pytest.mark.parametrize("raw", ["Pos", "Positive!", "", " ", "Postive", "Neg ative", 1, None, True, ["Positive"]])
def test_coded_refused_listing_the_values(raw: Any) -> None:
    assert refused(coded("Positive", "Negative"), raw) == ("value", "The value must be one of: Positive, Negative.")


def test_coded_values_differing_only_in_case_need_an_exact_match() -> None:
    analyte = coded("A", "a", "B")
    assert parse_value(analyte, "A").text == "A"
    assert parse_value(analyte, "a").text == "a"
    assert parse_value(analyte, "b").text == "B"
    assert refused(analyte, " a") == ("value", "The value must be one of: A, a, B.")


# -- age --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("born", "at", "days"),
    [
        (date(2025, 3, 1), date(2025, 3, 1), 0),
        (date(2025, 3, 1), date(2025, 3, 2), 1),
        (date(2025, 3, 1), date(2026, 2, 28), 364),
        (date(2025, 3, 1), date(2026, 3, 1), 365),  # first birthday
        (date(2023, 3, 1), date(2024, 2, 29), 365),  # a leap year: 365 days the day before the birthday
        (date(2023, 3, 1), date(2024, 3, 1), 366),
        (date(2024, 2, 29), date(2025, 2, 28), 365),
        (date(2024, 2, 29), date(2025, 3, 1), 366),
        (date(2008, 6, 15), date(2026, 6, 15), 6574),
    ],
)
def test_age_in_days(born: date, at: date, days: int) -> None:
    assert age_in_days(born, at) == days


def test_age_before_birth_refused() -> None:
    with pytest.raises(ValueError, match="2025-02-28 is before the date of birth 2025-03-01"):
        age_in_days(date(2025, 3, 1), date(2025, 2, 28))


def test_age_takes_dates_not_datetimes() -> None:
    with pytest.raises(TypeError, match="takes dates"):
        age_in_days(date(2025, 3, 1), datetime(2026, 3, 1, 10, 0))
    with pytest.raises(TypeError, match="takes dates"):
        age_in_days(datetime(2025, 3, 1, 10, 0), date(2026, 3, 1))


# -- reference bands --------------------------------------------------------------------------------------

NEWBORN = band("any", 0, 30, "14", "24")
INFANT = band("any", 30, 365, "9", "14")
MALE_ADULT = band("male", 365, None, "13", "17")
FEMALE_ADULT = band("female", 365, None, "12", "15")
HAEMOGLOBIN = [MALE_ADULT, NEWBORN, FEMALE_ADULT, INFANT]  # in no particular order


@pytest.mark.parametrize(
    ("sex", "age", "expected"),
    [
        ("male", 0, NEWBORN),
        ("female", 0, NEWBORN),
        ("other", 0, NEWBORN),
        ("unknown", 0, NEWBORN),
        ("male", 29, NEWBORN),
        ("male", 30, INFANT),  # the lower end is inclusive, the upper exclusive
        ("female", 364, INFANT),
        ("male", 365, MALE_ADULT),
        ("female", 365, FEMALE_ADULT),
        ("male", 40_000, MALE_ADULT),  # an open upper end
        ("female", 40_000, FEMALE_ADULT),
        ("other", 364, INFANT),
        ("other", 365, None),  # only `any` bands for other and unknown
        ("unknown", 365, None),
        ("any", 365, None),
        ("", 365, None),
        ("male", -1, None),
    ],
)
def test_band_by_sex_and_age(sex: str, age: int, expected: ReferenceRange | None) -> None:
    assert reference_range_for(HAEMOGLOBIN, sex=sex, age_days=age) is expected


def test_band_changes_on_the_birthday() -> None:
    ranges = [band("any", 0, 365, "9", "14"), band("any", 365, None, "11", "16")]
    born = date(2025, 3, 1)
    day_before = reference_range_for(ranges, sex="male", age_days=age_in_days(born, date(2026, 2, 28)))
    birthday = reference_range_for(ranges, sex="male", age_days=age_in_days(born, date(2026, 3, 1)))
    assert day_before is ranges[0]
    assert birthday is ranges[1]


def test_sex_band_preferred_over_an_any_band_covering_the_same_age() -> None:
    general = band("any", 0, None, "10", "20")
    male = band("male", 6570, None, "13", "17")
    ranges = [general, male]
    assert reference_range_for(ranges, sex="male", age_days=6570) is male
    assert reference_range_for(ranges, sex="male", age_days=6569) is general  # the male band starts later
    assert reference_range_for(ranges, sex="female", age_days=6570) is general
    assert reference_range_for(ranges, sex="other", age_days=6570) is general
    assert reference_range_for(list(reversed(ranges)), sex="male", age_days=6570) is male


def test_no_band() -> None:
    assert reference_range_for([], sex="male", age_days=100) is None
    assert reference_range_for([band("female", 0, None)], sex="male", age_days=100) is None
    assert reference_range_for([band("male", 0, 100)], sex="male", age_days=100) is None
    assert reference_range_for(iter([band("male", 0, 101)]), sex="male", age_days=100) is not None


def test_overlapping_bands_of_one_sex_the_latest_start_wins() -> None:
    wide, narrow = band("male", 0, None), band("male", 100, 200)
    assert reference_range_for([wide, narrow], sex="male", age_days=150) is narrow
    assert reference_range_for([narrow, wide], sex="male", age_days=150) is narrow


# -- flags --------------------------------------------------------------------------------------------------

RANGE = band("any", 0, None, "12", "16")
CRIT_LOW, CRIT_HIGH = Decimal("7"), Decimal("20")


@pytest.mark.parametrize(
    ("value", "flag"),
    [
        ("0", "LL"),
        ("6.9999", "LL"),
        ("7", "L"),  # equal to the critical limit: not critical
        ("7.0001", "L"),
        ("11.9999", "L"),
        ("12", "N"),  # the range's limits are inclusive
        ("14", "N"),
        ("16", "N"),
        ("16.0001", "H"),
        ("20", "H"),  # equal to the critical limit: not critical
        ("20.0001", "HH"),
        ("9999999999.9999", "HH"),
    ],
)
def test_flag_with_range_and_critical_limits(value: str, flag: str) -> None:
    assert interpret(Decimal(value), range=RANGE, critical_low=CRIT_LOW, critical_high=CRIT_HIGH) == flag


@pytest.mark.parametrize(("value", "flag"), [("6.9999", "LL"), ("7", ""), ("14", ""), ("20", ""), ("20.0001", "HH")])
def test_flag_without_range_only_critical_or_nothing(value: str, flag: str) -> None:
    assert interpret(Decimal(value), range=None, critical_low=CRIT_LOW, critical_high=CRIT_HIGH) == flag


@pytest.mark.parametrize("value", ["0", "14", "9999999999.9999"])
def test_no_range_no_critical_limits_no_flag(value: str) -> None:
    assert interpret(Decimal(value), range=None, critical_low=None, critical_high=None) == ""


@pytest.mark.parametrize(
    ("value", "flag"),
    [("0", "L"), ("11.9999", "L"), ("12", "N"), ("16", "N"), ("16.0001", "H"), ("30", "H"), ("31", "HH")],
)
def test_flag_with_only_a_high_critical_limit(value: str, flag: str) -> None:
    assert interpret(Decimal(value), range=RANGE, critical_low=None, critical_high=Decimal(30)) == flag


def test_flag_with_a_one_sided_range() -> None:
    at_least = band("any", 0, None, low="40", high=None)  # e.g. HDL cholesterol
    at_most = band("any", 0, None, low=None, high="200")  # e.g. total cholesterol
    assert interpret(Decimal("39.9999"), range=at_least, critical_low=None, critical_high=None) == "L"
    assert interpret(Decimal("40"), range=at_least, critical_low=None, critical_high=None) == "N"
    assert interpret(Decimal("9999"), range=at_least, critical_low=None, critical_high=None) == "N"
    assert interpret(Decimal("0"), range=at_most, critical_low=None, critical_high=None) == "N"
    assert interpret(Decimal("200"), range=at_most, critical_low=None, critical_high=None) == "N"
    assert interpret(Decimal("200.0001"), range=at_most, critical_low=None, critical_high=None) == "H"


def test_flag_with_a_single_point_range() -> None:
    point = band("any", 0, None, low="0", high="0")
    assert interpret(Decimal("0"), range=point, critical_low=None, critical_high=None) == "N"
    assert interpret(Decimal("0.0001"), range=point, critical_low=None, critical_high=None) == "H"


# -- the whole: parsed value, band, flag ------------------------------------------------------------------


def test_interpretation_of_a_quantity_stores_the_band_used() -> None:
    analyte = quantity(low="7", high="20")
    parsed = parse_value(analyte, "12.5", "g/dl")
    assert interpretation_for(analyte, parsed, ranges=HAEMOGLOBIN, sex="male", age_days=10_000) == Interpretation(
        flag="L", reference_low=Decimal("13"), reference_high=Decimal("17")
    )
    assert interpretation_for(analyte, parsed, ranges=HAEMOGLOBIN, sex="female", age_days=10_000) == Interpretation(
        flag="N", reference_low=Decimal("12"), reference_high=Decimal("15")
    )
    assert interpretation_for(analyte, parsed, ranges=HAEMOGLOBIN, sex="other", age_days=10_000) == Interpretation(
        flag="", reference_low=None, reference_high=None
    )
    critical = parse_value(analyte, "6.5")
    assert interpretation_for(analyte, critical, ranges=HAEMOGLOBIN, sex="other", age_days=10_000) == Interpretation(
        flag="LL", reference_low=None, reference_high=None
    )


def test_text_coded_and_report_results_get_no_flag() -> None:
    none = Interpretation(flag="", reference_low=None, reference_high=None)
    for analyte, raw in [(text_analyte(), "Pale yellow"), (coded("Positive", "Negative"), "positive"), (None, "x")]:
        parsed = parse_value(analyte, raw)
        assert interpretation_for(analyte, parsed, ranges=HAEMOGLOBIN, sex="male", age_days=100) == none


# -- against an independent implementation, on random inputs ---------------------------------------------


def _oracle_quantity(digits: int, places: int) -> Decimal | None:
    """The number `digits` x 10^-places if the column can hold it exactly, in integer arithmetic."""
    if places > 4 and digits % 10 ** (places - 4):
        return None
    if digits >= 10 ** (10 + places):
        return None
    return Decimal(digits).scaleb(-places)


def test_random_numeric_strings_against_integer_arithmetic() -> None:
    rng = random.Random(20260514)
    analyte = quantity()
    for _ in range(3000):
        places = rng.choice([0, 0, 1, 2, 3, 4, 4, 5, 6, 8])
        digits = rng.choice(
            [
                rng.randrange(10 ** rng.randint(1, 16)),
                rng.randrange(10**14) * 10 ** rng.randint(0, 4),
                10 ** (10 + places),
            ]
        )
        text = str(digits).rjust(places + 1, "0")
        raw = f"{text[: len(text) - places]}.{text[len(text) - places :]}" if places else text
        expected = _oracle_quantity(digits, places)
        if expected is None:
            with pytest.raises(ResultValueError) as caught:
                parse_value(analyte, raw)
            assert caught.value.field == "value", raw
        else:
            parsed = parse_value(analyte, raw).quantity
            assert parsed == expected, raw
            as_json = parse_value(analyte, JSONParser().parse(io.BytesIO(f'{{"v": {raw}}}'.encode()))["v"])
            assert as_json.quantity == expected, raw


def _oracle_flag(value: int, low: int | None, high: int | None, crit_low: int | None, crit_high: int | None) -> str:
    """The flag computed on ten-thousandths as integers, by the order of the thresholds on the line."""
    if crit_low is not None and value - crit_low < 0:
        return "LL"
    if crit_high is not None and crit_high - value < 0:
        return "HH"
    if low is None and high is None:
        return ""
    return "L" if low is not None and value < low else "H" if high is not None and value > high else "N"


def _random_bands(rng: random.Random, sex: str) -> list[ReferenceRange]:
    cuts = sorted(rng.sample(range(1, 120), rng.randint(0, 5)))
    edges = [rng.choice([0, rng.randint(0, 10)]), *cuts, rng.choice([None, 130])]
    bands = []
    for start, end in itertools.pairwise(edges):
        if (end is not None and end <= start) or rng.random() < 0.25:
            continue  # a gap
        low = rng.randint(0, 50_000)
        high = low + rng.randint(0, 50_000)
        one_sided = rng.choice([None, "low", "high"]) if rng.random() < 0.2 else None  # never both open
        bands.append(
            ReferenceRange(
                sex=sex,
                age_min_days=start,
                age_max_days=end,
                low=None if one_sided == "low" else Decimal(low).scaleb(-4),
                high=None if one_sided == "high" else Decimal(high).scaleb(-4),
            )
        )
    return bands


def test_random_bands_and_values_against_a_day_by_day_table() -> None:
    rng = random.Random(1234)
    for _ in range(300):
        ranges = [
            *_random_bands(rng, "any"),
            *(_random_bands(rng, "male") if rng.random() < 0.7 else []),
            *(_random_bands(rng, "female") if rng.random() < 0.7 else []),
        ]
        rng.shuffle(ranges)
        table: dict[tuple[str, int], ReferenceRange] = {}
        for item in ranges:
            for day in range(item.age_min_days, item.age_max_days if item.age_max_days is not None else 200):
                table[item.sex, day] = item
        crit_low = rng.choice([None, rng.randint(0, 20_000)])
        crit_high = rng.choice([None, rng.randint(60_000, 120_000)])
        analyte = Analyte(
            value_type="quantity",
            unit="mg/dL",
            critical_low=None if crit_low is None else Decimal(crit_low).scaleb(-4),
            critical_high=None if crit_high is None else Decimal(crit_high).scaleb(-4),
        )
        for _ in range(30):
            sex = rng.choice(["male", "female", "other", "unknown"])
            age = rng.randrange(200)
            expected_band = (table.get((sex, age)) if sex in ("male", "female") else None) or table.get(("any", age))
            assert reference_range_for(ranges, sex=sex, age_days=age) is expected_band, (sex, age)

            value = rng.choice(
                [
                    rng.randint(0, 130_000),
                    *(limit + delta for limit in (crit_low, crit_high) if limit is not None for delta in (-1, 0, 1)),
                ]
            )
            value = max(value, 0)
            low = high = None
            if expected_band is not None:
                low = None if expected_band.low is None else int(expected_band.low.scaleb(4))
                high = None if expected_band.high is None else int(expected_band.high.scaleb(4))
            parsed = parse_value(analyte, str(Decimal(value).scaleb(-4)))
            got = interpretation_for(analyte, parsed, ranges=ranges, sex=sex, age_days=age)
            flag = _oracle_flag(value, low, high, crit_low, crit_high)
            assert got.flag == flag, (value, low, high, crit_low, crit_high)
