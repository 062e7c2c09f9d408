"""clinic.text.has_non_ascii_digit: Unicode digits anywhere in a string, ASCII ones never."""

from __future__ import annotations

import pytest

from clinic.text import has_non_ascii_digit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", False),
        ("0123456789", False),
        ("6f1c0d3e-6d8a-4b5e-9d3c-2a1b0c9d8e7f", False),
        ("Ramesh Kumar", False),
        ("Anaïs", False),  # non-ASCII, but no digit
        ("\u0967\u0968\u0969", True),  # Devanagari 1 2 3
        ("98765\u0664", True),  # an Arabic-Indic 4 at the end
        ("²", True),  # superscript two: str.isdigit() says yes, PostgreSQL's [0-9] says no
    ],
)
def test_has_non_ascii_digit(text: str, expected: bool) -> None:
    assert has_non_ascii_digit(text) is expected
