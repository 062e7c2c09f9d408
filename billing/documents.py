"""The printable GST documents (docs/api-rules.md §12): a tax invoice, and a credit note in the same layout.

A TaxDocument holds what the page shows, as text and stored figures: it is built from the objects
billing.selectors.invoice_get(..., detail=True) loads (with the HSN/SAC summary of
billing.representations), never from figures computed again here. billing.document_pdf lays it out.

Drafts are titled "DRAFT - NOT A TAX INVOICE" (they have no number yet); cancelled documents carry the
mark CANCELLED.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal, cast

from django.utils import timezone

from billing.models import CreditNote, CreditNoteLine, Invoice, LineItem, Payment
from billing.representations import HsnSummaryRow, hsn_summary
from clinic.errors import NotFound
from clinic.lib.amount_words import rupees_in_words
from clinic.lib.tax import TaxCategory
from clinic.models import Branch
from clinic.states import GST_STATE_CODES
from patients.models import Patient

TAX_INVOICE = "TAX INVOICE"
CREDIT_NOTE = "CREDIT NOTE"
DRAFT_TITLE = "DRAFT - NOT A TAX INVOICE"
CANCELLED = "CANCELLED"
DRAFT = "DRAFT"
_UNTAXED_LABELS = {
    TaxCategory.EXEMPT: "Exempt",
    TaxCategory.NIL_RATED: "Nil rated",
    TaxCategory.ZERO_RATED: "Zero rated",
}


@dataclass(frozen=True)
class Party:
    """The supplier or the recipient: a name, address lines, and labelled details (GSTIN, state...)."""

    name: str
    address: tuple[str, ...]
    details: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Line:
    description: str
    hsn_sac: str
    quantity: str  # "" for a credit of an amount
    rate: Decimal | None  # None on a credit note
    discount: Decimal | None
    taxable: Decimal
    tax_rate: str  # "18%", or the untaxed category: "Exempt"
    cgst: Decimal
    sgst: Decimal
    igst: Decimal
    amount: Decimal


@dataclass(frozen=True)
class SummaryRow:
    hsn_sac: str
    tax_rate: str
    taxable: Decimal
    cgst: Decimal
    sgst: Decimal
    igst: Decimal
    total_tax: Decimal


@dataclass(frozen=True)
class Figure:
    label: str
    amount: Decimal


@dataclass(frozen=True)
class Entry:
    """A payment, refund or credit note listed on the invoice."""

    day: datetime.date
    description: str
    amount: Decimal


@dataclass(frozen=True)
class TaxDocument:
    kind: Literal["invoice", "credit_note"]
    title: str
    mark: str | None  # DRAFT or CANCELLED, shown across every page
    number: str | None
    filename: str
    facts: tuple[tuple[str, str], ...]  # number, date, place of supply...: the block beside the supplier
    supplier: Party
    recipient: Party
    interstate: bool
    lines: tuple[Line, ...]
    hsn_summary: tuple[SummaryRow, ...]
    totals: tuple[Figure, ...]
    total: Figure  # the grand total, or the credit note's total
    total_in_words: str
    payments: tuple[Entry, ...] = ()
    credit_notes: tuple[Entry, ...] = ()
    refunds: tuple[Entry, ...] = ()
    settlement: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = field(default=())


def format_date(day: datetime.date) -> str:
    return day.strftime("%d %b %Y")


def _state(name: str) -> str:
    """Karnataka -> "Karnataka (29)": the state with its GST state code."""
    code = GST_STATE_CODES.get(name)
    return f"{name} ({code})" if code else name


def _rate_label(category: str, rate: Decimal) -> str:
    if category == TaxCategory.TAXABLE:
        return f"{rate.normalize():f}%"
    return _UNTAXED_LABELS.get(TaxCategory(category), category)


def _quantity(value: Decimal | None) -> str:
    if value is None:
        return ""
    return f"{value.normalize():f}"


def filename_of(number: str | None, draft_id: object) -> str:
    """BLR/2026-27/00042 -> BLR-2026-27-00042.pdf; an unnumbered (draft) invoice: draft-<first 8 of its id>.pdf."""
    return f"{number.replace('/', '-')}.pdf" if number else f"draft-{str(draft_id)[:8]}.pdf"


def _supplier(branch: Branch) -> Party:
    place = " - ".join(part for part in (branch.city, branch.pincode) if part)
    details = [("State", _state(branch.state)), ("GSTIN", branch.gstin or "Not registered")]
    if branch.phone:
        details.append(("Phone", branch.phone))
    return Party(branch.name, tuple(part for part in (branch.address_line1, place) if part), tuple(details))


def _recipient(patient: Patient) -> Party:
    place = " - ".join(part for part in (patient.address_city, patient.address_pincode) if part)
    details = [("Patient ID", patient.patient_id)] if patient.patient_id else []
    if patient.address_state:
        details.append(("State", _state(patient.address_state)))
    details.append(("GSTIN", "Unregistered"))
    return Party(patient.name, tuple(part for part in (patient.address_line1, place) if part), tuple(details))


def _summary(rows: Iterable[HsnSummaryRow]) -> tuple[SummaryRow, ...]:
    return tuple(
        SummaryRow(
            hsn_sac=row["hsn_sac"] or "-",
            tax_rate=_rate_label(row["tax_category"], row["tax_rate"]),
            taxable=row["taxable_value"],
            cgst=row["cgst"],
            sgst=row["sgst"],
            igst=row["igst"],
            total_tax=row["total_tax"],
        )
        for row in rows
    )


def _tax_figures(interstate: bool, cgst: Decimal, sgst: Decimal, igst: Decimal) -> list[Figure]:
    return [Figure("IGST", igst)] if interstate else [Figure("CGST", cgst), Figure("SGST", sgst)]


def _mode(payment_mode: str) -> str:
    return str(Payment.Mode(payment_mode).label)


def _money_entry(day: datetime.date, payment_mode: str, reference: str, amount: Decimal) -> Entry:
    return Entry(day, f"{_mode(payment_mode)} {reference}".strip(), amount)


def _settlement(invoice: Invoice) -> tuple[Figure, ...]:
    """What the invoice asks and what was settled, as it stands: the credit note and refund figures only
    when there are any."""
    figures = [Figure("Grand total", invoice.grand_total)]
    if invoice.credited:
        figures += [Figure("Credited", invoice.credited), Figure("Net total", invoice.net_total)]
    figures.append(Figure("Paid", invoice.paid))
    if invoice.refunded:
        figures.append(Figure("Refunded", invoice.refunded))
    figures.append(Figure("Balance due", invoice.balance))
    if invoice.refund_due:
        figures.append(Figure("Refund due", invoice.refund_due))
    return tuple(figures)


def invoice_document(invoice: Invoice) -> TaxDocument:
    """The tax invoice of an invoice loaded with billing.selectors.invoice_get(..., detail=True)."""
    draft = invoice.invoice_number is None
    cancelled = invoice.status == Invoice.Status.CANCELLED
    lines: Sequence[LineItem] = list(invoice.line_items.all())
    facts = [
        ("Invoice No.", invoice.invoice_number or "Not numbered (draft)"),
        ("Invoice date", format_date(invoice.date)),
        ("Place of supply", _state(invoice.place_of_supply)),
        ("Reverse charge", "No"),
    ]
    notes = []
    if cancelled and invoice.cancelled_at is not None:
        when = format_date(timezone.localtime(invoice.cancelled_at, invoice.branch.zone).date())
        notes.append(f"Cancelled on {when}: {invoice.cancellation_reason}")
    billed = not draft and not cancelled
    return TaxDocument(
        kind="invoice",
        title=DRAFT_TITLE if draft else TAX_INVOICE,
        mark=CANCELLED if cancelled else (DRAFT if draft else None),
        number=invoice.invoice_number,
        filename=filename_of(invoice.invoice_number, invoice.id),
        facts=tuple(facts),
        supplier=_supplier(invoice.branch),
        recipient=_recipient(invoice.patient),
        interstate=invoice.interstate,
        lines=tuple(
            Line(
                description=line.service_name,
                hsn_sac=line.hsn_sac,
                quantity=_quantity(line.quantity),
                rate=line.rate,
                discount=line.discount,
                taxable=line.taxable_amount,
                tax_rate=_rate_label(line.tax_category, line.tax_rate),
                cgst=line.cgst,
                sgst=line.sgst,
                igst=line.igst,
                amount=line.amount,
            )
            for line in lines
        ),
        hsn_summary=_summary(hsn_summary(lines)),
        totals=(
            Figure("Sub total", invoice.sub_total),
            Figure("Discount", invoice.discount),
            Figure("Taxable value", invoice.taxable),
            *_tax_figures(invoice.interstate, invoice.cgst, invoice.sgst, invoice.igst),
            Figure("Total tax", invoice.tax),
        ),
        total=Figure("Grand total", invoice.grand_total),
        total_in_words=rupees_in_words(invoice.grand_total),
        payments=tuple(
            _money_entry(p.payment_date, p.payment_mode, p.reference, p.amount) for p in invoice.payments.all()
        ),
        credit_notes=tuple(
            Entry(note.date, f"{note.credit_note_number}: {note.reason}", note.total)
            for note in invoice.credit_notes.all()
        ),
        refunds=tuple(
            _money_entry(r.refund_date, r.payment_mode, r.reference, r.amount) for r in invoice.refunds.all()
        ),
        settlement=_settlement(invoice) if billed else (),
        notes=tuple(notes),
    )


def credit_note_document(credit_note: CreditNote, invoice: Invoice) -> TaxDocument:
    """The credit note, in the invoice's layout; `invoice` is the one it was loaded with (detail=True)."""
    lines: Sequence[CreditNoteLine] = list(credit_note.lines.all())
    facts = (
        ("Credit note No.", credit_note.credit_note_number),
        ("Credit note date", format_date(credit_note.date)),
        ("Original invoice No.", invoice.invoice_number or ""),
        ("Original invoice date", format_date(invoice.date)),
        ("Place of supply", _state(invoice.place_of_supply)),
        ("Reason", credit_note.reason),
    )
    return TaxDocument(
        kind="credit_note",
        title=CREDIT_NOTE,
        mark=None,
        number=credit_note.credit_note_number,
        filename=filename_of(credit_note.credit_note_number, credit_note.id),
        facts=facts,
        supplier=_supplier(invoice.branch),
        recipient=_recipient(invoice.patient),
        interstate=invoice.interstate,
        lines=tuple(
            Line(
                description=line.service_name,
                hsn_sac=line.hsn_sac,
                quantity=_quantity(line.quantity),
                rate=None,
                discount=None,
                taxable=line.taxable_amount,
                tax_rate=_rate_label(line.tax_category, line.tax_rate),
                cgst=line.cgst,
                sgst=line.sgst,
                igst=line.igst,
                amount=line.amount,
            )
            for line in lines
        ),
        # A credit line has every field the summary reads from an invoice line (code, category, rate, figures).
        hsn_summary=_summary(hsn_summary(cast(Sequence[LineItem], lines))),
        totals=(
            Figure("Taxable value", credit_note.taxable),
            *_tax_figures(invoice.interstate, credit_note.cgst, credit_note.sgst, credit_note.igst),
            Figure("Total tax", credit_note.tax),
        ),
        total=Figure("Total credit", credit_note.total),
        total_in_words=rupees_in_words(credit_note.total),
    )


def credit_note_of(invoice: Invoice, ref: str) -> CreditNote:
    """One of the invoice's (prefetched) credit notes; NotFound for any other id, malformed ones included."""
    try:
        key = uuid.UUID(ref)
    except ValueError:
        raise NotFound(f"No credit note {ref!r} on this invoice.") from None
    for credit_note in invoice.credit_notes.all():
        if credit_note.id == key:
            return credit_note
    raise NotFound(f"No credit note {ref!r} on this invoice.")
