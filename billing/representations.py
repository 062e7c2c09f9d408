"""The billing response bodies (CONTRACT section 8): one TypedDict per shape, named as its OpenAPI component
(clinic.api.shapes derives the component from it), and the functions that build them.

Money leaves as Decimal with two places (a JSON number through clinic.api.renderers, never a float); ids,
dates and times as UUID, date and datetime objects, which the renderer writes as their ISO strings.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, Literal, TypedDict, cast

from billing import models
from clinic.api.shapes import Doc, Number

# The invoice columns' precision (14 digits; clinic.api.shapes.Money has 12), as documented before.
Amount = Number(max_digits=14, decimal_places=2)

InvoiceStatus = Annotated[str, models.Invoice.Status]
# Payment.Mode's values without labels: the enum the payment request body declares too (PaymentModeEnum).
PaymentMode = Literal["cash", "card", "upi", "neft", "cheque", "online", "insurance"]


class InvoiceSummary(TypedDict):
    id: uuid.UUID
    invoice_number: Annotated[str | None, Doc("Null for drafts.")]
    patient_name: str
    total: Annotated[Decimal, Amount, Doc("The grand total.")]
    paid: Annotated[Decimal, Amount]
    balance: Annotated[Decimal, Amount, Doc("total - paid")]
    status: InvoiceStatus
    date: datetime.date


class InvoiceBranch(TypedDict):
    id: uuid.UUID
    name: str
    gstin: str | None
    state: str


class InvoicePatient(TypedDict):
    id: uuid.UUID
    patient_id: str
    name: str
    phone: str


class InvoiceLineItem(TypedDict):
    id: uuid.UUID
    service_name: str
    department: Annotated[str, Doc("Department name.")]
    quantity: Annotated[Decimal, Number(max_digits=10, decimal_places=3)]
    rate: Annotated[Decimal, Amount]
    discount: Annotated[Decimal, Amount]
    tax_rate: Annotated[Decimal, Number(max_digits=5, decimal_places=2)]
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


class InvoiceDetail(TypedDict):
    id: uuid.UUID
    invoice_number: Annotated[str | None, Doc("BLR/2026-27/00042; null for drafts.")]
    date: datetime.date
    status: InvoiceStatus
    branch: InvoiceBranch
    patient: InvoicePatient
    line_items: list[InvoiceLineItem]
    totals: InvoiceTotals
    payments: list[Payment]
    paid: Annotated[Decimal, Amount]
    balance: Annotated[Decimal, Amount]


class PaidInvoice(TypedDict):
    id: uuid.UUID
    status: InvoiceStatus
    paid: Annotated[Decimal, Amount]
    balance: Annotated[Decimal, Amount]


class PaymentRecorded(TypedDict):
    payment: Payment
    invoice: PaidInvoice


class FinancialSummary(TypedDict):
    total_billed: Annotated[
        Decimal, Amount, Doc("Sum of the grand totals of finalized, partially paid and paid invoices dated in range.")
    ]
    total_collected: Annotated[Decimal, Amount, Doc("Sum of the payments dated in the range.")]
    total_outstanding: Annotated[Decimal, Amount, Doc("Sum of the current balances of the billed invoices.")]
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


def invoice_detail(invoice: models.Invoice) -> InvoiceDetail:
    """The invoice detail of CONTRACT section 8 (load it with billing.selectors.invoice_get)."""
    branch, patient = invoice.branch, invoice.patient
    return {
        "id": invoice.id,
        "invoice_number": invoice.invoice_number,
        "date": invoice.date,
        "status": invoice.status,
        "branch": {"id": branch.id, "name": branch.name, "gstin": branch.gstin or None, "state": branch.state},
        "patient": {"id": patient.id, "patient_id": patient.patient_id, "name": patient.name, "phone": patient.phone},
        "line_items": [line_item_representation(line) for line in invoice.line_items.all()],
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
        "payments": [payment_representation(payment, invoice) for payment in invoice.payments.all()],
        "paid": invoice.paid,
        "balance": invoice.balance,
    }


def payment_result(payment: models.Payment, invoice: models.Invoice) -> PaymentRecorded:
    """The 201 body of a recorded payment: the payment and the invoice's new status, paid and balance."""
    return {
        "payment": payment_representation(payment, invoice),
        "invoice": {"id": invoice.id, "status": invoice.status, "paid": invoice.paid, "balance": invoice.balance},
    }


def financial_summary(figures: Mapping[str, Any]) -> FinancialSummary:
    """The summary body, from the figures of billing.selectors.billing_summary."""
    return {
        "total_billed": figures["total_billed"],
        "total_collected": figures["total_collected"],
        "total_outstanding": figures["total_outstanding"],
        "collection_by_mode": figures["collection_by_mode"],
        "revenue_by_department": figures["revenue_by_department"],
    }
