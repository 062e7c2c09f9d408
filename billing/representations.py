"""The billing response bodies (docs/api-rules.md §11): one TypedDict per shape, named as its OpenAPI component
(clinic.api.shapes derives the component from it), and the functions that build them.

Money leaves as Decimal with two places (a JSON number through clinic.api.renderers, never a float); ids,
dates and times as UUID, date and datetime objects, which the renderer writes as their ISO strings.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Annotated, Any, Literal, TypedDict, cast

from billing import models
from clinic.lib.shapes import Doc, Number
from clinic.lib.tax import TaxCategory as TaxCategoryChoices
from clinic.states import GST_STATE_CODES

ZERO = Decimal("0.00")

# The invoice columns' precision (14 digits; clinic.api.shapes.Money has 12), as documented before.
Amount = Number(max_digits=14, decimal_places=2)

InvoiceStatus = Annotated[str, models.Invoice.Status]
TaxCategory = Annotated[str, TaxCategoryChoices]
TaxRate = Annotated[Decimal, Number(max_digits=5, decimal_places=2)]
HsnSac = Annotated[str | None, Doc("SAC (services) or HSN (goods) code; null when none was given.")]
# Payment.Mode's values without labels: the enum the payment request body declares too (PaymentModeEnum).
PaymentMode = Literal["cash", "card", "upi", "neft", "cheque", "online", "insurance"]


class InvoiceSummary(TypedDict):
    id: uuid.UUID
    invoice_number: Annotated[str | None, Doc("Null for drafts.")]
    patient_name: str
    total: Annotated[Decimal, Amount, Doc("The grand total.")]
    paid: Annotated[Decimal, Amount]
    balance: Annotated[Decimal, Amount, Doc("Left to collect: max(0, total - credited - (paid - refunded)).")]
    status: InvoiceStatus
    date: datetime.date


class InvoiceBranch(TypedDict):
    id: uuid.UUID
    name: str
    gstin: str | None
    state: str


class InvoicePatient(TypedDict):
    """Who is billed: ids and name only. A client with billing scopes alone sees no phone or other contact
    (docs/api-rules.md §11.8); the patient's resource holds those, under patients:read."""

    id: uuid.UUID
    patient_id: str
    name: str


class InvoiceLineItem(TypedDict):
    id: uuid.UUID
    service_name: str
    department: Annotated[str, Doc("Department name.")]
    quantity: Annotated[Decimal, Number(max_digits=10, decimal_places=3)]
    rate: Annotated[Decimal, Amount]
    discount: Annotated[Decimal, Amount]
    tax_rate: TaxRate
    tax_category: TaxCategory
    hsn_sac: HsnSac
    taxable_amount: Annotated[Decimal, Amount, Doc("quantity x rate - discount")]
    cgst: Annotated[Decimal, Amount]
    sgst: Annotated[Decimal, Amount]
    igst: Annotated[Decimal, Amount]
    amount: Annotated[Decimal, Amount, Doc("taxable_amount + cgst + sgst + igst")]


class InvoiceTotals(TypedDict):
    sub_total: Annotated[Decimal, Amount, Doc("Sum of quantity x rate.")]
    discount: Annotated[Decimal, Amount]
    taxable: Annotated[Decimal, Amount]
    cgst: Annotated[Decimal, Amount]
    sgst: Annotated[Decimal, Amount]
    igst: Annotated[Decimal, Amount]
    tax: Annotated[Decimal, Amount, Doc("cgst + sgst + igst")]
    grand_total: Annotated[Decimal, Amount]


class Payment(TypedDict):
    """A payment received against an invoice; payments are never changed or reversed."""

    id: uuid.UUID
    amount: Annotated[Decimal, Amount]
    payment_mode: PaymentMode
    reference: Annotated[str | None, Doc("Null for a cash payment without one.")]
    payment_date: datetime.date
    recorded_at: Annotated[datetime.datetime, Doc("With the branch's UTC offset.")]


class HsnSummaryRow(TypedDict):
    """The lines of one HSN/SAC code, tax category and rate, summed: the HSN/SAC summary a GST tax invoice
    carries."""

    hsn_sac: HsnSac
    tax_category: TaxCategory
    tax_rate: TaxRate
    taxable_value: Annotated[Decimal, Amount]
    cgst: Annotated[Decimal, Amount]
    sgst: Annotated[Decimal, Amount]
    igst: Annotated[Decimal, Amount]
    total_tax: Annotated[Decimal, Amount]


class CreditNoteLine(TypedDict):
    id: uuid.UUID
    line_id: Annotated[uuid.UUID, Doc("The invoice line credited.")]
    service_name: str
    hsn_sac: HsnSac
    tax_category: TaxCategory
    tax_rate: TaxRate
    quantity: Annotated[
        Decimal | None, Number(max_digits=10, decimal_places=3), Doc("Units credited; null for an amount credit.")
    ]
    taxable_amount: Annotated[Decimal, Amount]
    cgst: Annotated[Decimal, Amount]
    sgst: Annotated[Decimal, Amount]
    igst: Annotated[Decimal, Amount]
    amount: Annotated[Decimal, Amount]


class CreditNoteTotals(TypedDict):
    taxable: Annotated[Decimal, Amount]
    cgst: Annotated[Decimal, Amount]
    sgst: Annotated[Decimal, Amount]
    igst: Annotated[Decimal, Amount]
    tax: Annotated[Decimal, Amount]
    total: Annotated[Decimal, Amount, Doc("What the invoice's net total went down by.")]


class CreditNote(TypedDict):
    """A GST credit note: immutable, numbered in the branch's own credit note series of its financial year."""

    id: uuid.UUID
    credit_note_number: Annotated[str, Doc("BLR/CN/2026-27/00001")]
    date: datetime.date
    invoice_id: uuid.UUID
    invoice_number: str
    reason: str
    lines: list[CreditNoteLine]
    totals: CreditNoteTotals
    created_at: Annotated[datetime.datetime, Doc("With the branch's UTC offset.")]


class Refund(TypedDict):
    """Money paid back to the patient; refunds are never changed or reversed."""

    id: uuid.UUID
    amount: Annotated[Decimal, Amount]
    payment_mode: Annotated[PaymentMode, Doc("How the money went back.")]
    reference: Annotated[str | None, Doc("Null for a cash refund without one.")]
    refund_date: datetime.date
    recorded_at: Annotated[datetime.datetime, Doc("With the branch's UTC offset.")]


class InvoiceDetail(TypedDict):
    id: uuid.UUID
    invoice_number: Annotated[str | None, Doc("BLR/2026-27/00042; null for drafts.")]
    date: datetime.date
    status: InvoiceStatus
    branch: InvoiceBranch
    patient: InvoicePatient
    place_of_supply: Annotated[str, Doc("State of supply: the patient's, else the branch's.")]
    place_of_supply_code: Annotated[str | None, Doc("Its GST state code, e.g. 29.")]
    line_items: list[InvoiceLineItem]
    totals: InvoiceTotals
    hsn_summary: list[HsnSummaryRow]
    payments: list[Payment]
    credit_notes: list[CreditNote]
    refunds: list[Refund]
    paid: Annotated[Decimal, Amount, Doc("Sum of the payments.")]
    credited: Annotated[Decimal, Amount, Doc("Sum of the credit notes.")]
    net_total: Annotated[Decimal, Amount, Doc("grand_total - credited")]
    refunded: Annotated[Decimal, Amount, Doc("Sum of the refunds.")]
    balance: Annotated[Decimal, Amount, Doc("Left to collect: max(0, net_total - (paid - refunded)).")]
    refund_due: Annotated[Decimal, Amount, Doc("Owed to the patient: max(0, (paid - refunded) - net_total).")]


class PaidInvoice(TypedDict):
    """The invoice's money after a payment, credit note or refund."""

    id: uuid.UUID
    status: InvoiceStatus
    paid: Annotated[Decimal, Amount]
    credited: Annotated[Decimal, Amount]
    net_total: Annotated[Decimal, Amount]
    refunded: Annotated[Decimal, Amount]
    balance: Annotated[Decimal, Amount]
    refund_due: Annotated[Decimal, Amount]


class PaymentRecorded(TypedDict):
    payment: Payment
    invoice: PaidInvoice


class CreditNoteIssued(TypedDict):
    credit_note: CreditNote
    invoice: PaidInvoice


class RefundRecorded(TypedDict):
    refund: Refund
    invoice: PaidInvoice


class FinancialSummary(TypedDict):
    total_billed: Annotated[
        Decimal, Amount, Doc("Sum of the grand totals of finalized, partially paid and paid invoices dated in range.")
    ]
    total_collected: Annotated[Decimal, Amount, Doc("Sum of the payments dated in the range.")]
    total_outstanding: Annotated[Decimal, Amount, Doc("Sum of the current balances of the billed invoices.")]
    total_credited: Annotated[Decimal, Amount, Doc("Sum of the credit notes dated in the range.")]
    total_refunded: Annotated[Decimal, Amount, Doc("Sum of the refunds dated in the range.")]
    collection_by_mode: Annotated[
        dict[str, Annotated[Decimal, Amount]], Doc("Every payment mode, with 0 where nothing was collected.")
    ]
    revenue_by_department: Annotated[
        dict[str, Annotated[Decimal, Amount]], Doc("Department name to the taxable amount of the billed lines.")
    ]


def _quantity(value: Decimal) -> Decimal:
    """1.000 -> 1, 0.500 -> 0.5: the quantity as sent, without the storage's trailing zeros."""
    return value.quantize(Decimal(1)) if value == value.to_integral_value() else value.normalize()


def invoice_summary(invoice: models.Invoice) -> InvoiceSummary:
    """An element of the invoice list: the fields of the specification's Invoice summary."""
    return {
        "id": invoice.id,
        "invoice_number": invoice.invoice_number,
        "patient_name": invoice.patient.name,
        "total": invoice.grand_total,
        "paid": invoice.paid,
        "balance": invoice.balance,
        "status": invoice.status,
        "date": invoice.date,
    }


def line_item_representation(line: models.LineItem) -> InvoiceLineItem:
    return {
        "id": line.id,
        "service_name": line.service_name,
        "department": line.department.name,
        "quantity": _quantity(line.quantity),
        "rate": line.rate,
        "discount": line.discount,
        "tax_rate": line.tax_rate,
        "tax_category": line.tax_category,
        "hsn_sac": line.hsn_sac or None,
        "taxable_amount": line.taxable_amount,
        "cgst": line.cgst,
        "sgst": line.sgst,
        "igst": line.igst,
        "amount": line.amount,
    }


def payment_representation(payment: models.Payment, invoice: models.Invoice) -> Payment:
    return {
        "id": payment.id,
        "amount": payment.amount,
        "payment_mode": cast(PaymentMode, payment.payment_mode),  # a Payment.Mode value (a DB constraint)
        "reference": payment.reference or None,
        "payment_date": payment.payment_date,
        "recorded_at": payment.recorded_at.astimezone(invoice.branch.zone),
    }


def hsn_summary(lines: Iterable[models.LineItem]) -> list[HsnSummaryRow]:
    """The lines summed per HSN/SAC code, category and rate, in code order (lines without a code last)."""
    rows: dict[tuple[str, str, Decimal], list[Decimal]] = {}
    for line in lines:
        sums = rows.setdefault((line.hsn_sac, line.tax_category, line.tax_rate), [ZERO, ZERO, ZERO, ZERO])
        for index, value in enumerate((line.taxable_amount, line.cgst, line.sgst, line.igst)):
            sums[index] += value
    return [
        {
            "hsn_sac": code or None,
            "tax_category": category,
            "tax_rate": rate,
            "taxable_value": taxable,
            "cgst": cgst,
            "sgst": sgst,
            "igst": igst,
            "total_tax": cgst + sgst + igst,
        }
        for (code, category, rate), (taxable, cgst, sgst, igst) in sorted(
            rows.items(), key=lambda row: (row[0][0] == "", row[0][0], row[0][1], row[0][2])
        )
    ]


def credit_note_representation(credit_note: models.CreditNote, invoice: models.Invoice) -> CreditNote:
    return {
        "id": credit_note.id,
        "credit_note_number": credit_note.credit_note_number,
        "date": credit_note.date,
        "invoice_id": invoice.id,
        "invoice_number": invoice.invoice_number or "",
        "reason": credit_note.reason,
        "lines": [
            {
                "id": line.id,
                "line_id": line.line_id,
                "service_name": line.service_name,
                "hsn_sac": line.hsn_sac or None,
                "tax_category": line.tax_category,
                "tax_rate": line.tax_rate,
                "quantity": None if line.quantity is None else _quantity(line.quantity),
                "taxable_amount": line.taxable_amount,
                "cgst": line.cgst,
                "sgst": line.sgst,
                "igst": line.igst,
                "amount": line.amount,
            }
            for line in credit_note.lines.all()
        ],
        "totals": {
            "taxable": credit_note.taxable,
            "cgst": credit_note.cgst,
            "sgst": credit_note.sgst,
            "igst": credit_note.igst,
            "tax": credit_note.tax,
            "total": credit_note.total,
        },
        "created_at": credit_note.created_at.astimezone(invoice.branch.zone),
    }


def refund_representation(refund: models.Refund, invoice: models.Invoice) -> Refund:
    return {
        "id": refund.id,
        "amount": refund.amount,
        "payment_mode": cast(PaymentMode, refund.payment_mode),  # a Payment.Mode value (a DB constraint)
        "reference": refund.reference or None,
        "refund_date": refund.refund_date,
        "recorded_at": refund.recorded_at.astimezone(invoice.branch.zone),
    }


def invoice_money(invoice: models.Invoice) -> PaidInvoice:
    return {
        "id": invoice.id,
        "status": invoice.status,
        "paid": invoice.paid,
        "credited": invoice.credited,
        "net_total": invoice.net_total,
        "refunded": invoice.refunded,
        "balance": invoice.balance,
        "refund_due": invoice.refund_due,
    }


def invoice_detail(invoice: models.Invoice) -> InvoiceDetail:
    """The invoice detail of docs/api-rules.md §11 and §12 (load it with billing.selectors.invoice_get)."""
    branch, patient = invoice.branch, invoice.patient
    lines = list(invoice.line_items.all())
    return {
        "id": invoice.id,
        "invoice_number": invoice.invoice_number,
        "date": invoice.date,
        "status": invoice.status,
        "branch": {"id": branch.id, "name": branch.name, "gstin": branch.gstin or None, "state": branch.state},
        "patient": {"id": patient.id, "patient_id": patient.patient_id, "name": patient.name},
        "place_of_supply": invoice.place_of_supply,
        "place_of_supply_code": GST_STATE_CODES.get(invoice.place_of_supply),
        "line_items": [line_item_representation(line) for line in lines],
        "totals": {
            "sub_total": invoice.sub_total,
            "discount": invoice.discount,
            "taxable": invoice.taxable,
            "cgst": invoice.cgst,
            "sgst": invoice.sgst,
            "igst": invoice.igst,
            "tax": invoice.tax,
            "grand_total": invoice.grand_total,
        },
        "hsn_summary": hsn_summary(lines),
        "payments": [payment_representation(payment, invoice) for payment in invoice.payments.all()],
        "credit_notes": [credit_note_representation(note, invoice) for note in invoice.credit_notes.all()],
        "refunds": [refund_representation(refund, invoice) for refund in invoice.refunds.all()],
        "paid": invoice.paid,
        "credited": invoice.credited,
        "net_total": invoice.net_total,
        "refunded": invoice.refunded,
        "balance": invoice.balance,
        "refund_due": invoice.refund_due,
    }


def payment_result(payment: models.Payment, invoice: models.Invoice) -> PaymentRecorded:
    """The 201 body of a recorded payment: the payment and the invoice's new status, paid and balance."""
    return {
        "payment": payment_representation(payment, invoice),
        "invoice": invoice_money(invoice),
    }


def credit_note_result(credit_note: models.CreditNote, invoice: models.Invoice) -> CreditNoteIssued:
    """The 201 body of an issued credit note: the note and the invoice's money as it now stands."""
    return {"credit_note": credit_note_representation(credit_note, invoice), "invoice": invoice_money(invoice)}


def refund_result(refund: models.Refund, invoice: models.Invoice) -> RefundRecorded:
    """The 201 body of a recorded refund: the refund and the invoice's money as it now stands."""
    return {"refund": refund_representation(refund, invoice), "invoice": invoice_money(invoice)}


def financial_summary(figures: Mapping[str, Any]) -> FinancialSummary:
    """The summary body, from the figures of billing.selectors.billing_summary."""
    return {
        "total_billed": figures["total_billed"],
        "total_collected": figures["total_collected"],
        "total_outstanding": figures["total_outstanding"],
        "total_credited": figures["total_credited"],
        "total_refunded": figures["total_refunded"],
        "collection_by_mode": figures["collection_by_mode"],
        "revenue_by_department": figures["revenue_by_department"],
    }
