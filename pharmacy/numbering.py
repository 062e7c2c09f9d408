"""Prescription numbers `{BRANCH}-RX-{YYYY}-{000123}` and dispense numbers `{BRANCH}-DSP-{YYYY}-{000123}`,
each per branch per calendar year of the branch-local date, from counter rows (clinic.db.counter_next)
inside the creating transaction: consecutive, with no gaps or repeats, a rolled-back creation giving its
number back."""

from __future__ import annotations

import uuid

from clinic.db import counter_next
from pharmacy.models import DispenseCounter, PrescriptionCounter

DIGITS = 6


def format_prescription_number(branch_code: str, year: int, number: int) -> str:
    """`BLR-RX-2026-000123`."""
    return f"{branch_code}-RX-{year}-{number:0{DIGITS}d}"


def format_dispense_number(branch_code: str, year: int, number: int) -> str:
    """`BLR-DSP-2026-000123`."""
    return f"{branch_code}-DSP-{year}-{number:0{DIGITS}d}"


def next_prescription_number(*, branch_id: uuid.UUID, year: int) -> int:
    return counter_next(counter=PrescriptionCounter, key={"branch": branch_id, "year": year})


def next_dispense_number(*, branch_id: uuid.UUID, year: int) -> int:
    return counter_next(counter=DispenseCounter, key={"branch": branch_id, "year": year})
