"""LOINC codes: `NNNNNNN-C`, one to seven digits, a hyphen and a check digit computed with LOINC's mod 10
algorithm on the digits before the hyphen (the Luhn scheme: double every other digit from the right, add
the digits of the results and of the others; the check digit takes the sum to a multiple of ten)."""

from __future__ import annotations

import re

LOINC_PATTERN = re.compile(r"^[0-9]{1,7}-[0-9]$")


def check_digit(number: str) -> int:
    """The check digit of a LOINC code's part before the hyphen: check_digit("718") == 7."""
    total = 0
    for position, char in enumerate(reversed(number)):
        digit = int(char)
        if position % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return (10 - total % 10) % 10


def loinc_problem(code: str) -> str | None:
    """Why `code` is not a LOINC code (the format, or the wrong check digit), or None for a valid one."""
    if not LOINC_PATTERN.match(code):
        return "A LOINC code is 1 to 7 digits, a hyphen and a check digit, e.g. 718-7."
    number, digit = code.split("-")
    expected = check_digit(number)
    if int(digit) != expected:
        return f"Wrong check digit: LOINC {number} ends in -{expected} (mod 10)."
    return None
