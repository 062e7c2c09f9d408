"""GST arithmetic of CONTRACT section 8, in Decimal only (never float).

Per line: gross = quantity x rate and tax = taxable x tax_rate / 100, each rounded half-up to the paisa;
taxable = gross - discount; amount = taxable + tax. Inside one state (or when the patient's state is
unknown) the tax splits into CGST and SGST halves, otherwise it is all IGST.

The halves are taken from the rounded tax so that CGST + SGST is exactly the tax the line shows: CGST is
half the tax rounded half-up, SGST the rest. An odd paisa therefore goes to CGST (tax 0.05 -> CGST 0.03,
SGST 0.02), and SGST <= CGST <= SGST + 0.01 always.

Invoice totals are plain sums of the rounded line figures, so they add up exactly on paper.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

PAISA = Decimal("0.01")
ZERO = Decimal("0.00")
HUNDRED = Decimal(100)


def round_money(value: Decimal) -> Decimal:
    """Half-up to two places: 0.005 -> 0.01, 0.015 -> 0.02 (never banker's rounding)."""
    return value.quantize(PAISA, rounding=ROUND_HALF_UP)


class DiscountTooLarge(ValueError):
    """The discount exceeds quantity x rate: a line cannot have a negative taxable amount."""


@dataclass(frozen=True)
class LineTax:
    gross: Decimal
    discount: Decimal
    taxable: Decimal
    cgst: Decimal
    sgst: Decimal
    igst: Decimal

    @property
    def tax(self) -> Decimal:
        return self.cgst + self.sgst + self.igst

    @property
    def amount(self) -> Decimal:
        return self.taxable + self.tax


def line_tax(*, quantity: Decimal, rate: Decimal, discount: Decimal, tax_rate: Decimal, interstate: bool) -> LineTax:
    gross = round_money(quantity * rate)
    discount = round_money(discount)
    if discount > gross:
        raise DiscountTooLarge(f"The discount {discount} exceeds quantity x rate ({gross}).")
    taxable = gross - discount
    tax = round_money(taxable * tax_rate / HUNDRED)
    if interstate:
        return LineTax(gross=gross, discount=discount, taxable=taxable, cgst=ZERO, sgst=ZERO, igst=tax)
    cgst = round_money(tax / 2)
    return LineTax(gross=gross, discount=discount, taxable=taxable, cgst=cgst, sgst=tax - cgst, igst=ZERO)


@dataclass(frozen=True)
class Totals:
    sub_total: Decimal = ZERO
    discount: Decimal = ZERO
    taxable: Decimal = ZERO
    cgst: Decimal = ZERO
    sgst: Decimal = ZERO
    igst: Decimal = ZERO

    @property
    def tax(self) -> Decimal:
        return self.cgst + self.sgst + self.igst

    @property
    def grand_total(self) -> Decimal:
        return self.taxable + self.tax


def invoice_totals(lines: Iterable[LineTax]) -> Totals:
    totals = Totals()
    for line in lines:
        totals = Totals(
            sub_total=totals.sub_total + line.gross,
            discount=totals.discount + line.discount,
            taxable=totals.taxable + line.taxable,
            cgst=totals.cgst + line.cgst,
            sgst=totals.sgst + line.sgst,
            igst=totals.igst + line.igst,
        )
    return totals


def is_interstate(*, patient_state: str, branch_state: str) -> bool:
    """Inter-state supply when the patient's address is in another state; an unknown state counts as the
    branch's own (CONTRACT section 8). States are compared ignoring case and surrounding spaces."""
    patient = " ".join(patient_state.split()).casefold()
    return bool(patient) and patient != " ".join(branch_state.split()).casefold()
