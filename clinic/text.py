"""Character rules shared by the request checks and the domain validators (docs/api-rules.md §7), and the LIKE
pattern of a prefix search (patient names, FHIR Patient?name=)."""

from __future__ import annotations

import re

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


def has_non_ascii_digit(text: str) -> bool:
    """Devanagari, Arabic-Indic and other Unicode digits: Python's \\d and int() accept them, PostgreSQL's
    [0-9] checks do not, so identifiers and numbers must refuse them (ASCII digits only)."""
    # An ASCII string (nearly every one: paths, ids, query values) has none, and str.isascii() says so
    # without a Python-level loop over its characters.
    return not text.isascii() and any(ch.isdigit() and not ch.isascii() for ch in text)


def like_prefix(word: str) -> str:
    """A LIKE pattern for words starting with `word`, its own wildcards taken literally."""
    return re.sub(r"([\\%_])", r"\\\1", word) + "%"


def mask_phone(phone: str) -> str:
    """A phone number as staff lists and logs show it: the country prefix and the last four digits."""
    return phone[:3] + "*" * max(len(phone) - 7, 0) + phone[-4:] if len(phone) > 7 else "*" * len(phone)
