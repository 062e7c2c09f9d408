"""Lab order numbers `{BRANCH}-LAB-{YYYY}-{000123}` and accession numbers `{BRANCH}-{YY}-{0000123}`, each per
branch per calendar year of the branch-local date of the order, in two separate series.

An order takes one order number; each of its items (one per test) takes one accession number, the number the
specimen label and the DICOM worklist show (`BLR-26-0000123`: branch code, the year's last two digits, seven
digits). Both come from counter rows (clinic.db.counter_next) inside the ordering transaction: the rows stay
locked until commit, so orders of one branch and year are numbered in commit order, and a rolled-back order
gives its numbers back. Each series is consecutive, with no gaps or repeats.
"""

from __future__ import annotations

import uuid

from clinic.db import counter_next
from lab.models import AccessionCounter, LabOrderCounter

ORDER_DIGITS = 6
ACCESSION_DIGITS = 7


def format_order_number(branch_code: str, year: int, number: int) -> str:
    """`BLR-LAB-2026-000123`."""
    return f"{branch_code}-LAB-{year}-{number:0{ORDER_DIGITS}d}"


def format_accession_number(branch_code: str, year: int, number: int) -> str:
    """`BLR-26-0000123`."""
    return f"{branch_code}-{year % 100:02d}-{number:0{ACCESSION_DIGITS}d}"


def next_order_number(*, branch_id: uuid.UUID, year: int) -> int:
    """Take the branch's next order number of the year. Call inside the transaction that stores it."""
    return counter_next(counter=LabOrderCounter, key={"branch": branch_id, "year": year})


def next_accession_number(*, branch_id: uuid.UUID, year: int) -> int:
    """Take the branch's next accession number of the year. Call inside the transaction that stores it."""
    return counter_next(counter=AccessionCounter, key={"branch": branch_id, "year": year})
