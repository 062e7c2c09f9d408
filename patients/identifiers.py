"""Normalisation and validation of patient identifiers: phone numbers, ABHA and Aadhaar numbers."""

from __future__ import annotations

import re

import phonenumbers
from django.conf import settings

from clinic.text import has_non_ascii_digit

# Verhoeff tables: Aadhaar numbers end with a Verhoeff check digit, which catches every single-digit
# error and every transposition of adjacent digits (typos at the front desk).
_D = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 0, 6, 7, 8, 9, 5], [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
    [3, 4, 0, 1, 2, 8, 9, 5, 6, 7], [4, 0, 1, 2, 3, 9, 5, 6, 7, 8], [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2], [7, 6, 5, 9, 8, 2, 1, 0, 4, 3], [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
]  # fmt: skip
_P = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 5, 7, 6, 2, 8, 3, 0, 9, 4], [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
    [8, 9, 1, 6, 0, 4, 3, 5, 2, 7], [9, 4, 5, 3, 1, 2, 6, 8, 7, 0], [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
    [2, 7, 9, 3, 8, 0, 6, 4, 1, 5], [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
]  # fmt: skip
_INV = [0, 4, 3, 2, 1, 5, 6, 7, 8, 9]


def verhoeff_valid(number: str) -> bool:
    check = 0
    for i, digit in enumerate(reversed(number)):
        check = _D[check][_P[i % 8][int(digit)]]
    return check == 0


def verhoeff_check_digit(number: str) -> str:
    check = 0
    for i, digit in enumerate(reversed(number)):
        check = _D[check][_P[(i + 1) % 8][int(digit)]]
    return str(_INV[check])


def normalise_phone(raw: str) -> str:
    """E.164 for a valid number (without a + prefix, PHONE_DEFAULT_REGION is assumed); ValueError otherwise."""
    if has_non_ascii_digit(raw):
        # phonenumbers would quietly translate them; a phone number is written with ASCII digits.
        raise ValueError("Digits must be ASCII 0-9.")
    try:
        parsed = phonenumbers.parse(raw, settings.PHONE_DEFAULT_REGION)
    except phonenumbers.NumberParseException:
        raise ValueError("Not a phone number.") from None
    if not phonenumbers.is_valid_number(parsed):
        raise ValueError("Not a valid phone number for its country.")
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def normalise_abha(raw: str) -> str:
    """ABHA number: 14 digits, accepted with hyphens or spaces (91-1234-5678-9012)."""
    digits = re.sub(r"[\s-]", "", raw)
    if not re.fullmatch(r"[0-9]{14}", digits):
        raise ValueError("An ABHA number has 14 digits (hyphens allowed).")
    return digits


def normalise_aadhaar(raw: str) -> str:
    digits = re.sub(r"[\s-]", "", raw)
    if not re.fullmatch(r"[2-9][0-9]{11}", digits):
        raise ValueError("An Aadhaar number has 12 digits and does not start with 0 or 1.")
    if not verhoeff_valid(digits):
        raise ValueError("Not a valid Aadhaar number (check digit mismatch).")
    return digits


def format_patient_id(number: int) -> str:
    return settings.PATIENT_ID_FORMAT.format(number=number)


def normalise_patient_ref(raw: str) -> str:
    """patient_id compared case- and hyphen-insensitively: 'pat000123' finds 'PAT-000123'."""
    return re.sub(r"[\s-]", "", raw).upper()
