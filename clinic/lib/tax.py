"""GST arithmetic of docs/api-rules.md §11 and §12, in Decimal only (never float).

Every line has a tax category (section 13): `exempt` (healthcare services by a clinical establishment),
`nil_rated` and `zero_rated` carry no tax; `taxable` lines carry one of the statutory rates. Credit notes
reverse tax line by line with the same arithmetic (credit_line_tax).

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
from decimal import ROUND_DOWN, ROUND_HALF_UP, ROUND_UP, Decimal

from django.db import models

from clinic.states import state_resolve

PAISA = Decimal("0.01")
ZERO = Decimal("0.00")
HUNDRED = Decimal(100)


class TaxCategory(models.TextChoices):
    """The GST treatment of a supply (docs/api-rules.md §12)."""

    EXEMPT = "exempt", "Exempt (healthcare services by a clinical establishment)"
    NIL_RATED = "nil_rated", "Nil rated"
    ZERO_RATED = "zero_rated", "Zero rated"
    TAXABLE = "taxable", "Taxable"


# The GST rates in force for taxable supplies: the contract's 5, 12, 18 and 28 (with 0.25 and 3, which the
# law has for some goods), and 40, the rate the September 2025 rationalisation brought for a few goods.
# 12 and 28 stay valid: invoices may be dated back to 1 April of the previous financial year.
STATUTORY_RATES: tuple[Decimal, ...] = tuple(Decimal(r) for r in ("0.25", "3", "5", "12", "18", "28", "40"))
_RATES_TEXT = ", ".join(format(rate.normalize(), "f") for rate in STATUTORY_RATES)  # 0.25, 3, ... 40 (not 4E+1)
UNTAXED_CATEGORIES = (TaxCategory.EXEMPT, TaxCategory.NIL_RATED, TaxCategory.ZERO_RATED)
# SAC for services, HSN for goods: 4, 6 or 8 ASCII digits (4 suffice up to 5 crore turnover, 6 above).
HSN_SAC_PATTERN = r"^([0-9]{4}|[0-9]{6}|[0-9]{8})$"


def tax_category_problem(category: str, rate: Decimal) -> str | None:
    """Why `rate` cannot go with `category`, or None: untaxed categories carry 0, taxable a statutory rate."""
    if category not in TaxCategory.values:
        return f"Must be one of: {', '.join(TaxCategory.values)}."
    if category != TaxCategory.TAXABLE:
        return None if rate == 0 else f"A {category} supply carries no tax: tax_rate must be 0."
    if rate not in STATUTORY_RATES:
        return f"A taxable supply needs a GST rate of {_RATES_TEXT}."
    return None


def default_tax_category(rate: Decimal) -> str:
    """The category of a line that states only a rate: 0 is an exempt healthcare service (what a clinic's
    untaxed lines almost always are), anything else taxable."""
    return TaxCategory.EXEMPT if rate == 0 else TaxCategory.TAXABLE


def round_money(value: Decimal) -> Decimal:
    """Half-up to two places: 0.005 -> 0.01, 0.015 -> 0.02 (never banker's rounding)."""
    return value.quantize(PAISA, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class InclusivePrice:
    """A line's rate and discount such that the line's amount (taxable + tax) is its tax-inclusive price."""

    rate: Decimal
    discount: Decimal


def inclusive_price_line(*, unit_price: Decimal, quantity: Decimal, tax_rate: Decimal) -> InclusivePrice:
    """The rate and discount of a line of goods sold at a tax-inclusive price (a drug's MRP): the amount the
    patient pays, taxable value plus the tax on it, is the price times the quantity, never more (the law
    forbids charging above MRP) and short of it by at most a paisa when no taxable value in whole paise adds
    up exactly. The rate is the taxable value per unit rounded up to the paisa; the discount, less than a
    paisa per unit, brings quantity x rate back down to the taxable value."""
    total = round_money(unit_price * quantity)
    if tax_rate == 0 or quantity <= 0:
        return InclusivePrice(rate=round_money(unit_price), discount=ZERO)

    def amount(taxable: Decimal) -> Decimal:
        return taxable + round_money(taxable * tax_rate / HUNDRED)

    taxable = (total * HUNDRED / (HUNDRED + tax_rate)).quantize(PAISA, rounding=ROUND_DOWN)
    while amount(taxable + PAISA) <= total:
        taxable += PAISA
    while taxable > 0 and amount(taxable) > total:
        taxable -= PAISA
    rate = (taxable / quantity).quantize(PAISA, rounding=ROUND_UP)
    return InclusivePrice(rate=rate, discount=round_money(quantity * rate) - taxable)


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


def credit_line_tax(
    *, taxable: Decimal, tax_rate: Decimal, interstate: bool, remaining: LineTax | None = None
) -> LineTax:
    """The tax a credit of `taxable` (rupees of taxable value) reverses on a line: the line's own rate and
    split. When the credit takes all that is left of the line (`remaining`, the line's figures less what
    earlier credit notes took), it reverses exactly the tax that is left, so a line credited in parts never
    reverses more or less tax in all than it carried, whatever the rounding of each part."""
    if remaining is not None and taxable == remaining.taxable:
        return remaining
    figures = line_tax(quantity=Decimal(1), rate=taxable, discount=ZERO, tax_rate=tax_rate, interstate=interstate)
    if remaining is None:
        return figures
    # Never more of a kind than is left (a part rounded up just before the last part).
    return LineTax(
        gross=figures.gross,
        discount=ZERO,
        taxable=figures.taxable,
        cgst=min(figures.cgst, remaining.cgst),
        sgst=min(figures.sgst, remaining.sgst),
        igst=min(figures.igst, remaining.igst),
    )


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
    """Inter-state supply when the patient's address is in another state (docs/api-rules.md §11 and §12). The
    states are compared as clinic.states resolves them (name, ISO code or GST code); a blank or unrecognised
    patient state (a record from before the closed list) counts as unknown, hence as the branch's own."""
    patient = state_resolve(patient_state)
    return patient is not None and patient != state_resolve(branch_state)


def place_of_supply(*, patient_state: str, branch_state: str) -> str:
    """The state of supply as the invoice records it: the patient's (canonical name) when inter-state, else
    the branch's."""
    patient = state_resolve(patient_state)
    interstate = is_interstate(patient_state=patient_state, branch_state=branch_state)
    return str(patient.value) if interstate and patient is not None else branch_state
