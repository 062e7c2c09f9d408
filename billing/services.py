"""Writes on invoices and payments: drafts and their lines, finalization with gap-free numbers,
cancellation, and payments (CONTRACT section 8).

Every change to an existing invoice locks its row first (billing.locks, which states the lock order), so
concurrent changes of one invoice are serialised and each sees the state the previous one left. The
stored totals are recomputed from the lines by the same transaction that changes them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone

from billing import locks, numbering, tax
from billing.errors import DuplicatePayment
from billing.models import BILLED_STATUSES, BillableService, Invoice, LineItem, Payment
from clinic.db import violated_constraint
from clinic.errors import FieldError, InvalidState
from clinic.models import Branch, Department
from patients.models import Patient

Status = Invoice.Status
MAX_GRAND_TOTAL = Decimal("999999999999.99")
PAYABLE = (Status.FINALIZED, Status.PARTIALLY_PAID)

# CONTRACT section 8: from which statuses each operation is allowed; anything else is 409 invalid_state.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "edit": (Status.DRAFT,),
    "finalize": (Status.DRAFT,),
    "cancel": (Status.DRAFT, Status.FINALIZED),
    "pay": PAYABLE,
}


@dataclass(frozen=True)
class LineInput:
    """A line as the caller asked for it, catalogue defaults already applied (see line_inputs_resolve)."""

    service_name: str
    department: Department
    rate: Decimal
    tax_rate: Decimal
    quantity: Decimal = Decimal(1)
    discount: Decimal = Decimal("0.00")
    service: BillableService | None = None


def _today(branch: Branch) -> date:
    return timezone.localtime(timezone.now(), branch.zone).date()


def earliest_invoice_date(branch: Branch) -> date:
    """1 April of the previous financial year at the branch: late bills of the year just closed are still
    raised, anything older would be numbered into a series the accounts have long closed."""
    return numbering.financial_year_start(numbering.financial_year_start(_today(branch)) - timedelta(days=1))


def invoice_date_problem(branch: Branch, day: date) -> str | None:
    """Why `day` cannot be an invoice's date at the branch (CONTRACT section 11), or None."""
    today, earliest = _today(branch), earliest_invoice_date(branch)
    if day > today:
        return f"Cannot be in the future (today is {today} at this branch)."
    if day < earliest:
        return f"Cannot be before {earliest}, the start of the previous financial year."
    return None


def _check_invoice_date(branch: Branch, day: date) -> None:
    problem = invoice_date_problem(branch, day)
    if problem is not None:
        raise FieldError({"date": problem})


def _lock(invoice: Invoice, action: str) -> Invoice:
    """Re-read the invoice under a row lock and check that `action` is allowed from its status."""
    locked = locks.invoice_lock(invoice_id=invoice.pk)
    if locked.status not in TRANSITIONS[action]:
        allowed = " or ".join(TRANSITIONS[action])
        raise InvalidState(
            f"Cannot {action} an invoice that is {locked.status}; it must be {allowed}.",
            current_status=locked.status,
        )
    return locked


def _build_line(invoice: Invoice, item: LineInput, position: int, field: str) -> LineItem:
    try:
        figures = tax.line_tax(
            quantity=item.quantity,
            rate=item.rate,
            discount=item.discount,
            tax_rate=item.tax_rate,
            interstate=invoice.interstate,
        )
    except tax.DiscountTooLarge as exc:
        raise FieldError({f"{field}.discount": str(exc)}) from None
    return LineItem(
        invoice=invoice,
        branch_id=invoice.branch_id,
        invoice_date=invoice.date,
        billed=invoice.status in BILLED_STATUSES,
        position=position,
        service=item.service,
        service_name=item.service_name,
        department=item.department,
        quantity=item.quantity,
        rate=item.rate,
        discount=figures.discount,
        tax_rate=item.tax_rate,
        taxable_amount=figures.taxable,
        cgst=figures.cgst,
        sgst=figures.sgst,
        igst=figures.igst,
        amount=figures.amount,
    )


def _build_lines(invoice: Invoice, items: Sequence[LineInput], *, first_position: int = 0) -> list[LineItem]:
    """Every line computed; all bad discounts are named in one 400 (line_items.<index>.discount)."""
    lines, errors = [], {}
    for index, item in enumerate(items):
        try:
            lines.append(_build_line(invoice, item, first_position + index, f"line_items.{index}"))
        except FieldError as exc:
            errors.update(exc.errors)
    if errors:
        raise FieldError(errors)
    return lines


def _line_tax(line: LineItem) -> tax.LineTax:
    return tax.LineTax(
        gross=line.taxable_amount + line.discount,
        discount=line.discount,
        taxable=line.taxable_amount,
        cgst=line.cgst,
        sgst=line.sgst,
        igst=line.igst,
    )


def _store_totals(invoice: Invoice) -> None:
    """Recompute the stored totals from the invoice's lines (exact sums) and save them."""
    totals = tax.invoice_totals(_line_tax(line) for line in invoice.line_items.all())
    if totals.grand_total > MAX_GRAND_TOTAL:
        raise FieldError({"line_items": f"The invoice total cannot exceed {MAX_GRAND_TOTAL}."})
    invoice.sub_total, invoice.discount, invoice.taxable = totals.sub_total, totals.discount, totals.taxable
    invoice.cgst, invoice.sgst, invoice.igst = totals.cgst, totals.sgst, totals.igst
    invoice.tax, invoice.grand_total = totals.tax, totals.grand_total
    invoice.save(
        update_fields=[
            "sub_total",
            "discount",
            "taxable",
            "cgst",
            "sgst",
            "igst",
            "tax",
            "grand_total",
            "updated_at",
        ]
    )


def _finalize(invoice: Invoice) -> None:
    """Number a locked draft: the next number of its branch in the financial year of its date."""
    if not invoice.line_items.exists():
        raise FieldError({"line_items": "An invoice needs at least one line item to be finalized."})
    # A draft dated long ago (or a date the checks above never saw) would open or extend a closed year's series.
    _check_invoice_date(invoice.branch, invoice.date)
    year = numbering.financial_year(invoice.date)
    number = numbering.next_invoice_number(branch_id=invoice.branch_id, year=year)
    invoice.invoice_number = numbering.format_invoice_number(invoice.branch.code, year, number)
    invoice.financial_year = year
    invoice.status = Status.FINALIZED
    invoice.finalized_at = timezone.now()
    invoice.save(update_fields=["invoice_number", "financial_year", "status", "finalized_at", "updated_at"])


@transaction.atomic
def invoice_create(
    *,
    branch: Branch,
    patient: Patient,
    line_items: Sequence[LineInput],
    invoice_date: date | None = None,
    finalize: bool = False,
) -> Invoice:
    """Create a draft (and finalize it at once when asked). The place of supply and with it the CGST/SGST
    or IGST treatment are fixed here, from the patient's address state against the branch's state.
    `invoice_date` defaults to today at the branch; it may not be in the future nor before the start of the
    previous financial year (400 on `date`; checked again at finalization)."""
    day = invoice_date or _today(branch)
    _check_invoice_date(branch, day)
    interstate = tax.is_interstate(patient_state=patient.address_state, branch_state=branch.state)
    invoice = Invoice(
        branch=branch,
        patient=patient,
        date=day,
        interstate=interstate,
        place_of_supply=" ".join(patient.address_state.split()) if interstate else branch.state,
    )
    lines = _build_lines(invoice, line_items)
    invoice.save()
    LineItem.objects.bulk_create(lines)
    _store_totals(invoice)
    if finalize:
        _finalize(invoice)
    return invoice


@transaction.atomic
def invoice_update(
    *, invoice: Invoice, invoice_date: date | None = None, line_items: Sequence[LineInput] | None = None
) -> Invoice:
    """Change a draft: its date, and/or replace all its lines. 409 invalid_state once finalized."""
    invoice = _lock(invoice, "edit")
    if invoice_date is not None:
        _check_invoice_date(invoice.branch, invoice_date)
        invoice.date = invoice_date
        invoice.save(update_fields=["date", "updated_at"])
    if line_items is not None:
        lines = _build_lines(invoice, line_items)
        invoice.line_items.all().delete()
        LineItem.objects.bulk_create(lines)
    _store_totals(invoice)
    return invoice


@transaction.atomic
def line_item_add(*, invoice: Invoice, item: LineInput) -> LineItem:
    """Append a line to a draft and update its totals."""
    invoice = _lock(invoice, "edit")
    last = invoice.line_items.order_by("-position").values_list("position", flat=True).first()
    (line,) = _build_lines(invoice, [item], first_position=0 if last is None else last + 1)
    line.save()
    _store_totals(invoice)
    return line


@transaction.atomic
def line_item_update(*, line_item: LineItem, item: LineInput) -> LineItem:
    """Replace what a line of a draft bills (same position) and update the invoice's totals."""
    invoice = _lock(line_item.invoice, "edit")
    (line,) = _build_lines(invoice, [item], first_position=line_item.position)
    line.id = line_item.id
    line.save(force_update=True)
    _store_totals(invoice)
    return line


@transaction.atomic
def line_item_remove(*, line_item: LineItem) -> Invoice:
    invoice = _lock(line_item.invoice, "edit")
    invoice.line_items.filter(id=line_item.id).delete()
    _store_totals(invoice)
    return invoice


@transaction.atomic
def invoice_finalize(*, invoice: Invoice) -> Invoice:
    """draft -> finalized with the branch's next number of the invoice date's financial year."""
    invoice = _lock(invoice, "finalize")
    _finalize(invoice)
    return invoice


@transaction.atomic
def invoice_cancel(*, invoice: Invoice, reason: str) -> Invoice:
    """draft or finalized (hence nothing paid) -> cancelled. A finalized invoice keeps its number, so the
    series stays without gaps; a cancelled draft never had one."""
    reason = reason.strip()
    if not reason:
        raise FieldError({"reason": "A reason is required to cancel an invoice."})
    invoice = _lock(invoice, "cancel")
    invoice.status = Status.CANCELLED
    invoice.cancelled_at = timezone.now()
    invoice.cancellation_reason = reason
    invoice.save(update_fields=["status", "cancelled_at", "cancellation_reason", "updated_at"])
    return invoice


@transaction.atomic
def payment_record(
    *,
    invoice: Invoice,
    amount: Decimal,
    payment_mode: str,
    reference: str = "",
    payment_date: date | None = None,
    recorded_by: str = "system",
) -> Payment:
    """Record money received. The invoice row is locked for the whole check-and-write, so concurrent
    payments are applied one after another against the balance the previous one left.

    400 on `amount` (not above 0, or above the balance), `payment_mode`, `reference` (required for every
    mode but cash) or `payment_date` (in the future at the branch; default today there). 409 invalid_state
    unless the invoice is finalized or partially paid; 409 duplicate_payment for a second payment with
    the same mode and reference on the invoice."""
    reference = reference.strip()
    errors: dict[str, str] = {}
    if amount <= 0:
        errors["amount"] = "Must be greater than 0."
    if payment_mode not in Payment.Mode.values:
        errors["payment_mode"] = f"Must be one of: {', '.join(Payment.Mode.values)}."
    elif payment_mode != Payment.Mode.CASH and not reference:
        errors["reference"] = f"Required for {payment_mode} payments (only cash may go without one)."
    today = _today(invoice.branch)
    if payment_date is not None and payment_date > today:
        errors["payment_date"] = f"Cannot be in the future (today is {today} at this branch)."
    if errors:
        raise FieldError(errors)
    invoice = _lock(invoice, "pay")
    if amount > invoice.balance:
        raise FieldError({"amount": f"Cannot exceed the balance of {invoice.balance}."})
    if (
        payment_mode != Payment.Mode.CASH
        and invoice.payments.filter(payment_mode=payment_mode, reference=reference).exists()
    ):
        raise _duplicate(payment_mode, reference)
    try:
        with transaction.atomic():
            payment = Payment.objects.create(
                invoice=invoice,
                branch_id=invoice.branch_id,
                amount=amount,
                payment_mode=payment_mode,
                reference=reference,
                payment_date=payment_date or today,
                recorded_by=recorded_by[:200],
            )
    except IntegrityError as exc:  # a backstop: the row lock already serialises payments of one invoice
        if violated_constraint(exc) == "payment_unique_reference_per_invoice":
            raise _duplicate(payment_mode, reference) from None
        raise
    invoice.paid += amount
    invoice.status = Status.PAID if invoice.paid == invoice.grand_total else Status.PARTIALLY_PAID
    invoice.save(update_fields=["paid", "status", "updated_at"])
    return payment


def _duplicate(payment_mode: str, reference: str) -> DuplicatePayment:
    return DuplicatePayment(
        f"This invoice already has a {payment_mode} payment with reference {reference!r}.",
        payment_mode=payment_mode,
        reference=reference,
    )


def line_inputs_resolve(items: Sequence[dict]) -> list[LineInput]:
    """Turn requested lines into LineInputs: a `service_code` brings the catalogue entry's name, department,
    rate and tax rate, each of which the line may override; a free-text `service_name` line must state
    department, rate and tax_rate. Departments are named by UUID or by name (case ignored); a discount may
    not exceed quantity x rate. Every problem is named `line_items.<index>.<field>`, all in one FieldError."""
    codes = {item["service_code"] for item in items if item.get("service_code")}
    catalogue = {s.code: s for s in BillableService.objects.filter(code__in=codes).select_related("department")}
    departments = _departments({item["department"] for item in items if item.get("department")})
    resolved, errors = [], {}
    for index, item in enumerate(items):
        field = f"line_items.{index}"
        service = None
        if item.get("service_code"):
            service = catalogue.get(item["service_code"])
            if service is None:
                errors[f"{field}.service_code"] = f"No catalogue service {item['service_code']!r}."
                continue
            if not service.active:
                errors[f"{field}.service_code"] = f"The catalogue service {service.code} is no longer active."
                continue
        department = service.department if service else None
        if item.get("department"):
            department = departments.get(item["department"].strip().casefold())
            if department is None:
                errors[f"{field}.department"] = f"No department {item['department']!r}."
        line_errors = {
            f"{field}.{name}": "Required for a line without service_code."
            for name in ("department", "rate", "tax_rate")
            if service is None and item.get(name) is None
        }
        errors.update({k: v for k, v in line_errors.items() if k not in errors})
        if line_errors or department is None:
            continue
        line = LineInput(
            service=service,
            service_name=item.get("service_name") or (service.name if service else ""),
            department=department,
            rate=item["rate"] if item.get("rate") is not None else service.rate,  # type: ignore[union-attr]
            tax_rate=item["tax_rate"] if item.get("tax_rate") is not None else service.tax_rate,  # type: ignore[union-attr]
            quantity=item.get("quantity") or Decimal(1),
            discount=item.get("discount") or Decimal("0.00"),
        )
        gross = tax.round_money(line.quantity * line.rate)
        if tax.round_money(line.discount) > gross:
            discount = tax.round_money(line.discount)
            errors[f"{field}.discount"] = f"The discount {discount} exceeds quantity x rate ({gross})."
        resolved.append(line)
    if errors:
        raise FieldError(errors)
    return resolved


def _departments(refs: set[str]) -> dict[str, Department]:
    """Departments by UUID or name, keyed by the reference as sent (stripped, case-folded)."""
    found: dict[str, Department] = {}
    if not refs:
        return found
    ids, names = set(), set()
    for ref in refs:
        try:
            ids.add(uuid.UUID(ref.strip()))
        except ValueError:
            names.add(ref.strip().casefold())
    query = Q(id__in=ids) | Q(name_folded__in=names)
    for department in Department.objects.annotate(name_folded=Lower("name")).filter(query):
        found[str(department.id)] = department
        found[department.name.casefold()] = department
    return found
