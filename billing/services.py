"""Writes on invoices and payments: drafts and their lines, finalization with gap-free numbers,
cancellation, payments, credit notes and refunds (docs/api-rules.md §11 and §12). Each publishes its event
(billing.events) in its own transaction.

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
from django.db.models import DecimalField, Q, Sum
from django.db.models.functions import Coalesce, Lower
from django.utils import timezone

from billing import events, locks, numbering
from billing.errors import DuplicatePayment, DuplicateRefund
from billing.models import (
    BILLED_STATUSES,
    BillableService,
    CreditNote,
    CreditNoteLine,
    Invoice,
    LineItem,
    Payment,
    Refund,
)
from clinic.db import violated_constraint
from clinic.errors import FieldError, InvalidState
from clinic.lib import tax
from clinic.models import Branch, Department
from patients.models import Patient

Status = Invoice.Status
MAX_GRAND_TOTAL = Decimal("999999999999.99")
PAYABLE = (Status.FINALIZED, Status.PARTIALLY_PAID)

# docs/api-rules.md §11: from which statuses each operation is allowed; anything else is 409 invalid_state.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "edit": (Status.DRAFT,),
    "finalize": (Status.DRAFT,),
    "cancel": (Status.DRAFT, Status.FINALIZED),
    "pay": PAYABLE,
    "credit": BILLED_STATUSES,
    "refund": BILLED_STATUSES,
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
    tax_category: str = ""  # "" = from the rate (clinic.lib.tax.default_tax_category)
    hsn_sac: str = ""

    @property
    def category(self) -> str:
        return self.tax_category or tax.default_tax_category(self.tax_rate)


def _today(branch: Branch) -> date:
    return timezone.localtime(timezone.now(), branch.zone).date()


def earliest_invoice_date(branch: Branch) -> date:
    """1 April of the previous financial year at the branch: late bills of the year just closed are still
    raised, anything older would be numbered into a series the accounts have long closed."""
    return numbering.financial_year_start(numbering.financial_year_start(_today(branch)) - timedelta(days=1))


def invoice_date_problem(branch: Branch, day: date) -> str | None:
    """Why `day` cannot be an invoice's date at the branch (docs/api-rules.md §7), or None."""
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
        tax_category=item.category,
        hsn_sac=item.hsn_sac,
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
    events.invoice_publish(events.INVOICE_FINALIZED, invoice)


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
        place_of_supply=tax.place_of_supply(patient_state=patient.address_state, branch_state=branch.state),
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
def invoice_draft_lines_add(*, branch: Branch, patient: Patient, lines: Sequence[LineInput]) -> Invoice:
    """Bill `lines` on the patient's open draft at the branch (the latest one), or on a new draft: how a lab
    order and a dispense bill. The draft is locked once for all the lines (billing.locks), so they land
    together and a concurrent finalization either comes before (then 409, nothing added) or after them."""
    draft = (
        Invoice.objects.filter(branch=branch, patient=patient, status=Invoice.Status.DRAFT)
        .order_by("-created_at", "-id")
        .first()
    )
    if draft is None:
        return invoice_create(branch=branch, patient=patient, line_items=lines)
    draft = _lock(draft, "edit")
    for line in lines:
        line_item_add(invoice=draft, item=line)
    return draft


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
    if invoice.credited:
        raise InvalidState(
            "Cannot cancel an invoice that has credit notes; credit what is left instead.",
            current_status=invoice.status,
        )
    invoice.status = Status.CANCELLED
    invoice.cancelled_at = timezone.now()
    invoice.cancellation_reason = reason
    invoice.save(update_fields=["status", "cancelled_at", "cancellation_reason", "updated_at"])
    events.invoice_publish(events.INVOICE_CANCELLED, invoice)
    return invoice


def _settle(invoice: Invoice, changed: list[str]) -> None:
    """Save the money figures in `changed` with the status they imply (billing.models, the constraint
    invoice_status_matches_settlement): nothing left to collect is paid (settled), some net payment is
    partially_paid, none is finalized."""
    if invoice.balance == 0:
        invoice.status = Status.PAID
    elif invoice.net_paid > 0:
        invoice.status = Status.PARTIALLY_PAID
    else:
        invoice.status = Status.FINALIZED
    invoice.save(update_fields=[*changed, "status", "updated_at"])


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
    today = _today(invoice.branch)
    errors = _money_in_problems(
        amount=amount,
        payment_mode=payment_mode,
        reference=reference,
        day=payment_date,
        day_field="payment_date",
        today=today,
    )
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
    _settle(invoice, ["paid"])
    events.payment_publish(payment, invoice)
    return payment


def _duplicate(payment_mode: str, reference: str) -> DuplicatePayment:
    return DuplicatePayment(
        f"This invoice already has a {payment_mode} payment with reference {reference!r}.",
        payment_mode=payment_mode,
        reference=reference,
    )


def _money_in_problems(
    *, amount: Decimal, payment_mode: str, reference: str, day: date | None, day_field: str, today: date
) -> dict[str, str]:
    """The field checks payments and refunds share (400 on each field named)."""
    errors: dict[str, str] = {}
    if amount <= 0:
        errors["amount"] = "Must be greater than 0."
    if payment_mode not in Payment.Mode.values:
        errors["payment_mode"] = f"Must be one of: {', '.join(Payment.Mode.values)}."
    elif payment_mode != Payment.Mode.CASH and not reference:
        errors["reference"] = f"Required for {payment_mode} (only cash may go without one)."
    if day is not None and day > today:
        errors[day_field] = f"Cannot be in the future (today is {today} at this branch)."
    return errors


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
            tax_category=_line_category(item, service),
            hsn_sac=item.get("hsn_sac") or (service.hsn_sac if service else ""),
        )
        if problem := tax.tax_category_problem(line.category, line.tax_rate):
            errors[f"{field}.{'tax_category' if item.get('tax_category') else 'tax_rate'}"] = problem
        gross = tax.round_money(line.quantity * line.rate)
        if tax.round_money(line.discount) > gross:
            discount = tax.round_money(line.discount)
            errors[f"{field}.discount"] = f"The discount {discount} exceeds quantity x rate ({gross})."
        resolved.append(line)
    if errors:
        raise FieldError(errors)
    return resolved


def _line_category(item: dict, service: BillableService | None) -> str:
    """The category as sent; else the catalogue's, unless the line overrides the rate (then from the rate)."""
    if item.get("tax_category"):
        return item["tax_category"]
    if service is not None and item.get("tax_rate") is None:
        return service.tax_category
    return ""


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


@dataclass(frozen=True)
class CreditLineInput:
    """One line of a credit note request: all that is left of the invoice line, `quantity` units of it, or
    `amount` rupees of its taxable value (tax is added at the line's rate)."""

    line_id: uuid.UUID
    quantity: Decimal | None = None
    amount: Decimal | None = None


MAX_CREDIT_LINES = 100


def _credited_so_far(invoice: Invoice) -> dict[uuid.UUID, dict[str, Decimal]]:
    """Per invoice line, what earlier credit notes took (read under the invoice's lock)."""
    rows = (
        CreditNoteLine.objects.filter(credit_note__invoice=invoice)
        .order_by()
        .values("line_id")
        .annotate(
            taxable=Sum("taxable_amount"),
            cgst=Sum("cgst"),
            sgst=Sum("sgst"),
            igst=Sum("igst"),
            quantity=Coalesce(Sum("quantity"), Decimal(0), output_field=DecimalField()),
        )
    )
    return {row["line_id"]: {key: row[key] for key in ("taxable", "cgst", "sgst", "igst", "quantity")} for row in rows}


def _remaining(line: LineItem, taken: dict[str, Decimal] | None) -> tuple[tax.LineTax, Decimal]:
    """What is left to credit on a line: its figures less earlier credits, and its quantity less theirs."""
    taken = taken or {}
    zero = Decimal("0.00")
    remaining = tax.LineTax(
        gross=line.taxable_amount - taken.get("taxable", zero),
        discount=zero,
        taxable=line.taxable_amount - taken.get("taxable", zero),
        cgst=line.cgst - taken.get("cgst", zero),
        sgst=line.sgst - taken.get("sgst", zero),
        igst=line.igst - taken.get("igst", zero),
    )
    return remaining, line.quantity - taken.get("quantity", Decimal(0))


def _credit_line(
    line: LineItem, request: CreditLineInput, taken: dict[str, Decimal] | None, interstate: bool, field: str
) -> tuple[tax.LineTax, Decimal | None]:
    """The figures one requested credit line reverses, and the quantity it credits (None for an amount)."""
    remaining, units_left = _remaining(line, taken)
    if remaining.amount <= 0:
        raise FieldError({f"{field}.line_id": "Nothing is left to credit on this line."})
    quantity = request.quantity
    if request.amount is not None:
        if request.amount > remaining.taxable:
            raise FieldError({f"{field}.amount": f"At most {remaining.taxable} of taxable value is left on this line."})
        taxable = request.amount
    elif quantity is not None:
        if quantity > units_left:
            raise FieldError({f"{field}.quantity": f"At most {units_left.normalize():f} units are left on this line."})
        share = tax.round_money(line.taxable_amount * quantity / line.quantity)
        taxable = remaining.taxable if quantity == units_left else min(share, remaining.taxable)
    else:
        taxable, quantity = remaining.taxable, (units_left if units_left > 0 else None)
    figures = tax.credit_line_tax(taxable=taxable, tax_rate=line.tax_rate, interstate=interstate, remaining=remaining)
    if figures.amount <= 0:
        raise FieldError({field: "This credit comes to 0.00; there is nothing to credit."})
    return figures, quantity


@transaction.atomic
def credit_note_issue(
    *, invoice: Invoice, reason: str, lines: Sequence[CreditLineInput], issued_by: str = "system"
) -> CreditNote:
    """Issue a credit note against a finalized, partially paid or paid invoice (docs/api-rules.md §12).

    Under the invoice's row lock, each requested line is checked against what earlier credit notes left of
    it, so concurrent credit notes can never together credit more than a line (hence the invoice) holds.
    The note is dated today at the branch and numbered in the branch's credit note series of that
    financial year. The invoice's `credited` grows and its status follows its balance; its lines never
    change. 400 naming `reason`, `lines`, `lines.<i>.line_id|quantity|amount`; 409 invalid_state otherwise."""
    reason = reason.strip()
    errors: dict[str, str] = {}
    if not reason:
        errors["reason"] = "A reason is required for a credit note."
    if not lines:
        errors["lines"] = "Name at least one line to credit."
    seen: dict[uuid.UUID, int] = {}
    for index, item in enumerate(lines):
        if item.line_id in seen:
            errors[f"lines.{index}.line_id"] = f"Already named by lines.{seen[item.line_id]}."
        seen.setdefault(item.line_id, index)
    if errors:
        raise FieldError(errors)
    invoice = _lock(invoice, "credit")
    invoice_lines = {line.id: line for line in invoice.line_items.all()}
    taken = _credited_so_far(invoice)
    credits: list[tuple[LineItem, tax.LineTax, Decimal | None]] = []
    for index, item in enumerate(lines):
        field = f"lines.{index}"
        line = invoice_lines.get(item.line_id)
        if line is None:
            errors[f"{field}.line_id"] = "Not a line of this invoice."
            continue
        try:
            figures, quantity = _credit_line(line, item, taken.get(line.id), invoice.interstate, field)
        except FieldError as exc:
            errors.update(exc.errors)
            continue
        credits.append((line, figures, quantity))
    if errors:
        raise FieldError(errors)
    day = _today(invoice.branch)
    year = numbering.financial_year(day)
    number = numbering.next_credit_note_number(branch_id=invoice.branch_id, year=year)
    totals = tax.invoice_totals(figures for _, figures, _ in credits)
    credit_note = CreditNote.objects.create(
        invoice=invoice,
        branch_id=invoice.branch_id,
        credit_note_number=numbering.format_credit_note_number(invoice.branch.code, year, number),
        financial_year=year,
        date=day,
        reason=reason[:500],
        taxable=totals.taxable,
        cgst=totals.cgst,
        sgst=totals.sgst,
        igst=totals.igst,
        tax=totals.tax,
        total=totals.grand_total,
        created_by=issued_by[:200],
    )
    CreditNoteLine.objects.bulk_create(
        CreditNoteLine(
            credit_note=credit_note,
            line=line,
            position=position,
            service_name=line.service_name,
            hsn_sac=line.hsn_sac,
            tax_category=line.tax_category,
            tax_rate=line.tax_rate,
            quantity=quantity,
            taxable_amount=figures.taxable,
            cgst=figures.cgst,
            sgst=figures.sgst,
            igst=figures.igst,
            amount=figures.amount,
        )
        for position, (line, figures, quantity) in enumerate(credits)
    )
    invoice.credited += credit_note.total
    _settle(invoice, ["credited"])
    events.credit_note_publish(credit_note, invoice)
    return credit_note


@transaction.atomic
def refund_record(
    *,
    invoice: Invoice,
    amount: Decimal,
    payment_mode: str,
    reference: str = "",
    refund_date: date | None = None,
    recorded_by: str = "system",
) -> Refund:
    """Record money paid back to the patient: at most what was paid and not yet refunded (docs/api-rules.md
    §12), checked under the invoice's row lock so concurrent refunds never exceed it. The invoice's
    `refunded` grows and its status follows its balance (a refund without a credit note reopens it).

    400 on `amount`, `payment_mode`, `reference` (every mode but cash) or `refund_date` (in the future, or
    before the invoice date); 409 invalid_state on a draft or cancelled invoice; 409 duplicate_refund."""
    reference = reference.strip()
    today = _today(invoice.branch)
    errors = _money_in_problems(
        amount=amount,
        payment_mode=payment_mode,
        reference=reference,
        day=refund_date,
        day_field="refund_date",
        today=today,
    )
    if refund_date is not None and refund_date < invoice.date and "refund_date" not in errors:
        errors["refund_date"] = f"Cannot be before the invoice date ({invoice.date})."
    if errors:
        raise FieldError(errors)
    invoice = _lock(invoice, "refund")
    if amount > invoice.net_paid:
        raise FieldError({"amount": f"Cannot exceed what was paid and not yet refunded ({invoice.net_paid})."})
    duplicate = DuplicateRefund(
        f"This invoice already has a {payment_mode} refund with reference {reference!r}.",
        payment_mode=payment_mode,
        reference=reference,
    )
    if (
        payment_mode != Payment.Mode.CASH
        and invoice.refunds.filter(payment_mode=payment_mode, reference=reference).exists()
    ):
        raise duplicate
    try:
        with transaction.atomic():
            refund = Refund.objects.create(
                invoice=invoice,
                branch_id=invoice.branch_id,
                amount=amount,
                payment_mode=payment_mode,
                reference=reference,
                refund_date=refund_date or today,
                recorded_by=recorded_by[:200],
            )
    except IntegrityError as exc:  # a backstop: the row lock already serialises refunds of one invoice
        if violated_constraint(exc) == "refund_unique_reference_per_invoice":
            raise duplicate from None
        raise
    invoice.refunded += amount
    _settle(invoice, ["refunded"])
    events.refund_publish(refund, invoice)
    return refund
