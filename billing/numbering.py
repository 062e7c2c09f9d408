"""Invoice numbers `{BRANCH}/{YYYY-YY}/{00042}` and credit note numbers `{BRANCH}/CN/{YYYY-YY}/{00001}`, each
per branch per Indian financial year (April-March), in two separate series.

The number is taken from a counter row by an upsert inside the finalizing transaction. The row stays
locked until commit, so finalizations in one branch and year are numbered in commit order, and a
rolled-back finalization gives its number back: the series is consecutive with no gaps or repeats.
"""

from __future__ import annotations

import uuid
from datetime import date

from billing.models import CreditNoteNumberCounter, InvoiceNumberCounter
from clinic.db import counter_next

NUMBER_DIGITS = 5


def financial_year(day: date) -> str:
    """The Indian financial year of a (branch-local) date: 2026-03-31 -> "2025-26", 2026-04-01 -> "2026-27"."""
    start = day.year if day.month >= 4 else day.year - 1
    return f"{start}-{(start + 1) % 100:02d}"


def financial_year_start(day: date) -> date:
    """1 April of the financial year `day` falls in: 2026-03-31 -> 2025-04-01."""
    return date(day.year if day.month >= 4 else day.year - 1, 4, 1)


def format_invoice_number(branch_code: str, year: str, number: int) -> str:
    return f"{branch_code}/{year}/{number:0{NUMBER_DIGITS}d}"


def next_invoice_number(*, branch_id: uuid.UUID, year: str) -> int:
    """Take the branch's next number of the year. Call inside the transaction that stores it."""
    return counter_next(counter=InvoiceNumberCounter, key={"branch": branch_id, "financial_year": year})


def format_credit_note_number(branch_code: str, year: str, number: int) -> str:
    return f"{branch_code}/CN/{year}/{number:0{NUMBER_DIGITS}d}"


def next_credit_note_number(*, branch_id: uuid.UUID, year: str) -> int:
    """Take the branch's next credit note number of the year. Call inside the transaction that stores it."""
    return counter_next(counter=CreditNoteNumberCounter, key={"branch": branch_id, "financial_year": year})
