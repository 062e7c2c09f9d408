"""Scale data (issue 7; docs/api-rules.md §12): the service catalogue with tax categories and HSN/SAC,
invoices with 1-6 lines across departments, payments in every mode, credit notes and refunds, and the
invoice and credit note number counters, loaded with COPY.

Figures come from clinic.lib.tax, so stored totals are exactly what the services would compute; a credit note
line reverses tax with credit_line_tax, as billing.services does. Invoices are numbered in date order per
branch and financial year with no gaps (a cancelled finalized invoice keeps its number); credit notes
likewise, in their own series, by their date of issue. `paid`, `credited` and `refunded` are the exact sums
of the payments, credit notes and refunds, and the status follows from them by billing.services' rules
(_settle), as the constraints demand.

On an invoice, things happen in this order, each on or after the day of the one before: finalization,
payments, at most one credit note, refunds. What would fall after `today` has not happened yet (an instalment
not yet paid, a credit note or refund still to come), so every day, today included, holds only its own
share of the money: clamping such events onto today made the generated today hold ten times a normal day's
payments. About 2 % of billed invoices get a credit
note (one or two lines, each credited whole or in part), and most of those that then owe the patient money
refund it; a few paid invoices get a refund without a credit note (which reopens them).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction

from billing.numbering import financial_year, format_credit_note_number, format_invoice_number
from clinic.devdata.scale import Organisation, Timings, copy_rows, rng_uuid
from clinic.lib.tax import (
    LineTax,
    TaxCategory,
    Totals,
    credit_line_tax,
    invoice_totals,
    is_interstate,
    line_tax,
    place_of_supply,
)
from patients.devdata.scale import Patients

CHUNK_INVOICES = 25_000
CENT = Decimal("0.01")
ZERO = Decimal("0.00")


@dataclass(frozen=True)
class ServiceKind:
    """What every department (or the ones named) offers: healthcare services are exempt, with the SAC of the
    department's kind of care unless the kind names one; goods and non-healthcare services are taxable."""

    suffix: str
    code: str
    rates: tuple[int, int]  # rupees
    quantities: tuple[str, ...]
    category: str = TaxCategory.EXEMPT
    tax_rate: Decimal = ZERO
    hsn_sac: str = ""
    departments: tuple[str, ...] = ()


SERVICE_KINDS = (
    ServiceKind("consultation", "CONS", (400, 1500), ("1",)),
    ServiceKind("follow-up consultation", "FUP", (200, 800), ("1",)),
    # Medical laboratory and diagnostic-imaging services.
    ServiceKind("diagnostic test", "TEST", (300, 6000), ("1", "1", "2"), hsn_sac="999316"),
    ServiceKind("procedure", "PROC", (1500, 40000), ("1",)),
    # Goods: wadding, gauze, bandages and dressings (HSN 3005 90), GST 5 %.
    ServiceKind("consumables", "CONSUM", (50, 900), ("1", "2", "3", "5", "0.5"), TaxCategory.TAXABLE, Decimal(5), "300590"),
    # Cosmetic treatment is not healthcare: taxable at 18 % (SAC 999722).
    ServiceKind(
        "cosmetic procedure", "COSM", (2000, 15000), ("1",), TaxCategory.TAXABLE, Decimal(18), "999722",
        ("Dermatology",),
    ),
)  # fmt: skip
MODES = ["cash", "upi", "card", "insurance", "neft", "online", "cheque"]
MODE_WEIGHTS = [30, 30, 20, 7, 5, 5, 3]
STATUS_WEIGHTS = [("draft", 3), ("cancelled", 3), ("finalized", 12), ("partially_paid", 10), ("paid", 72)]
LINE_COUNT_WEIGHTS = [30, 25, 20, 12, 8, 5]
CREDIT_SHARE = 0.02  # of billed invoices: a credit note
REFUND_SHARE = 0.85  # of credited invoices that then owe the patient money: refunded (the rest still owe it)
REFUND_ONLY_SHARE = 0.004  # of paid invoices without a credit note: a refund all the same
CREDIT_REASONS = [
    "Service not rendered",
    "Test cancelled after billing",
    "Billed at the wrong rate",
    "Discount approved after billing",
    "Duplicate line",
    "Insurance adjustment",
]
INVOICE_COLUMNS = [
    "id", "branch_id", "patient_id", "date", "status", "invoice_number", "financial_year", "place_of_supply",
    "interstate", "sub_total", "discount", "taxable", "cgst", "sgst", "igst", "tax", "grand_total", "paid",
    "credited", "refunded", "finalized_at", "cancelled_at", "cancellation_reason", "created_at", "updated_at",
]  # fmt: skip
LINE_COLUMNS = [
    "id", "invoice_id", "position", "service_id", "service_name", "department_id", "quantity", "rate", "discount",
    "tax_rate", "tax_category", "hsn_sac", "taxable_amount", "cgst", "sgst", "igst", "amount", "branch_id",
    "invoice_date", "billed",
]  # fmt: skip
PAYMENT_COLUMNS = [
    "id", "invoice_id", "amount", "payment_mode", "reference", "payment_date", "recorded_at", "recorded_by",
    "branch_id",
]  # fmt: skip
REFUND_COLUMNS = [
    "id", "invoice_id", "branch_id", "amount", "payment_mode", "reference", "refund_date", "recorded_at",
    "recorded_by",
]  # fmt: skip
CREDIT_NOTE_COLUMNS = [
    "id", "invoice_id", "branch_id", "credit_note_number", "financial_year", "date", "reason", "taxable", "cgst",
    "sgst", "igst", "tax", "total", "created_at", "created_by",
]  # fmt: skip
CREDIT_LINE_COLUMNS = [
    "id", "credit_note_id", "line_id", "position", "service_name", "hsn_sac", "tax_category", "tax_rate", "quantity",
    "taxable_amount", "cgst", "sgst", "igst", "amount",
]  # fmt: skip


@dataclass(frozen=True)
class CatalogueEntry:
    id: uuid.UUID
    name: str
    department_id: uuid.UUID
    rate: Decimal
    tax_rate: Decimal
    category: str
    hsn_sac: str
    quantities: tuple[str, ...]


def healthcare_sac(department: str) -> str:
    """The SAC of a department's healthcare services (as migration 0006 classifies existing entries)."""
    name = department.casefold()
    if any(word in name for word in ("patholog", "radiolog", "lab", "imaging")):
        return "999316"  # medical laboratory and diagnostic-imaging services
    if "physio" in name:
        return "999314"  # nursing and physiotherapeutic services
    return "999312"  # medical and dental services


def generate_catalogue(
    rng: random.Random, *, organisation: Organisation, moment: datetime, timings: Timings
) -> list[CatalogueEntry]:
    """Five services per department (and the cosmetic procedures of some), each with its tax category,
    statutory GST rate and HSN/SAC."""
    services, rows = [], []
    for department_id, department in zip(organisation.departments, organisation.department_names, strict=True):
        prefix = department.replace(" ", "")[:4].upper()
        for kind in SERVICE_KINDS:
            if kind.departments and department not in kind.departments:
                continue
            low, high = kind.rates
            entry = CatalogueEntry(
                id=rng_uuid(rng),
                name=f"{department} {kind.suffix}",
                department_id=department_id,
                rate=Decimal(rng.randint(low, high) * 10) / 10,
                tax_rate=kind.tax_rate,
                category=kind.category,
                hsn_sac=kind.hsn_sac or healthcare_sac(department),
                quantities=kind.quantities,
            )
            services.append(entry)
            rows.append(
                (entry.id, f"{prefix}-{kind.code}", entry.name, department_id, entry.rate, entry.tax_rate,
                 entry.category, entry.hsn_sac, True, moment, moment)
            )  # fmt: skip
    copy_rows(
        "billing_billableservice",
        ["id", "code", "name", "department_id", "rate", "tax_rate", "tax_category", "hsn_sac", "active", "created_at",
         "updated_at"],
        rows,
        timings=timings,
    )  # fmt: skip
    return services


def _split(rng: random.Random, amount: Decimal, parts: int) -> list[Decimal]:
    """amount in `parts` positive paisa amounts that add up exactly."""
    parts = max(1, min(parts, int(amount / CENT)))
    shares = []
    left = amount
    for index in range(parts - 1):
        most = left - CENT * (parts - 1 - index)
        share = max(CENT, min(most, (amount / parts * Decimal(rng.uniform(0.6, 1.4))).quantize(CENT)))
        shares.append(share)
        left -= share
    shares.append(left)
    return shares


def settled_status(*, grand_total: Decimal, credited: Decimal, paid: Decimal, refunded: Decimal) -> str:
    """The status of a billed invoice with these figures (billing.services._settle): nothing left to collect
    is paid, some net payment partially_paid, none finalized."""
    net_paid = paid - refunded
    if max(ZERO, grand_total - credited - net_paid) == 0:
        return "paid"
    return "partially_paid" if net_paid > 0 else "finalized"


@dataclass(frozen=True)
class BilledLine:
    """An invoice line as a credit note needs it."""

    id: uuid.UUID
    position: int
    service_name: str
    hsn_sac: str
    category: str
    tax_rate: Decimal
    quantity: Decimal
    figures: LineTax


@dataclass(frozen=True)
class PendingNote:
    """A credit note before its number: the numbers follow the dates of issue, known once all are drawn."""

    id: uuid.UUID
    day: date
    created_at: datetime
    sequence: int
    branch_index: int
    invoice_id: uuid.UUID
    reason: str
    totals: Totals
    lines: list[tuple[uuid.UUID, BilledLine, LineTax, Decimal | None]]


def _credit_lines(
    rng: random.Random, lines: Sequence[BilledLine], interstate: bool
) -> list[tuple[uuid.UUID, BilledLine, LineTax, Decimal | None]]:
    """One or two lines of an invoice credited as billing.services._credit_line does for a first credit note:
    all of the line (its quantity and exactly the tax it carried), or an amount of its taxable value (the tax
    at its rate, never more than it carried)."""
    count = 1 if len(lines) == 1 or rng.random() < 0.7 else 2
    credits = []
    for line in sorted(rng.sample(list(lines), count), key=lambda chosen: chosen.position):
        remaining = LineTax(
            gross=line.figures.taxable,
            discount=ZERO,
            taxable=line.figures.taxable,
            cgst=line.figures.cgst,
            sgst=line.figures.sgst,
            igst=line.figures.igst,
        )
        quantity: Decimal | None
        if rng.random() < 0.5 or remaining.taxable < 2:
            taxable, quantity = remaining.taxable, line.quantity
        else:
            share = remaining.taxable * Decimal(rng.randint(5, 95)) / 100
            exact = rng.random() < 0.3  # else whole rupees, as a person would type it
            taxable = min(remaining.taxable, max(CENT, share.quantize(CENT if exact else Decimal(1))))
            quantity = None
        figures = credit_line_tax(taxable=taxable, tax_rate=line.tax_rate, interstate=interstate, remaining=remaining)
        credits.append((rng_uuid(rng), line, figures, quantity))
    return credits


def _refund(
    rng: random.Random, *, invoice_id: uuid.UUID, branch_id: uuid.UUID, amount: Decimal, mode: str, day: date,
    after: datetime, index: int,
) -> tuple[Any, ...]:  # fmt: skip
    """A refund row, paid back the way the money came, recorded after `after`."""
    reference = "" if mode == "cash" else f"RF-{mode.upper()}{rng.getrandbits(40):010X}{index}"
    recorded = datetime.combine(day, time(5, 0), tzinfo=UTC) + timedelta(minutes=rng.randrange(540))
    return (
        rng_uuid(rng), invoice_id, branch_id, amount, mode, reference, day, max(recorded, after + timedelta(minutes=1)),
        "staff:accounts",
    )  # fmt: skip


def generate_invoices(
    rng: random.Random,
    *,
    organisation: Organisation,
    patients: Patients,
    services: Sequence[CatalogueEntry],
    count: int,
    first_day: date,
    today: date,
    timings: Timings,
) -> dict[str, int]:
    branches = organisation.branches
    statuses = [s for s, _ in STATUS_WEIGHTS]
    status_weights = [w for _, w in STATUS_WEIGHTS]
    plan = []
    for sequence in range(count):
        patient = rng.randrange(len(patients.ids))
        low = max(first_day, patients.registered_days[patient])
        day = low + timedelta(days=rng.randint(0, max(0, (today - low).days)))
        home = patients.branch_indexes[patient] if rng.random() < 0.85 else rng.randrange(len(branches))
        plan.append((day, sequence, patient, home))
    plan.sort()
    numbers: dict[tuple[int, str], int] = {}
    notes: list[PendingNote] = []
    totals_count = {"invoices": 0, "lines": 0, "payments": 0, "credit_notes": 0, "credit_note_lines": 0, "refunds": 0}
    for chunk_start in range(0, len(plan), CHUNK_INVOICES):
        invoices, lines, payments, refunds = [], [], [], []
        for day, sequence, patient, branch_index in plan[chunk_start : chunk_start + CHUNK_INVOICES]:
            branch = branches[branch_index]
            state = patients.states[patient]
            interstate = is_interstate(patient_state=state, branch_state=branch.state)
            invoice_id = rng_uuid(rng)
            created = datetime.combine(day, time(3, 30), tzinfo=UTC) + timedelta(minutes=rng.randrange(600))
            billed_lines: list[BilledLine] = []
            status = rng.choices(statuses, weights=status_weights)[0]
            billed = status in ("finalized", "partially_paid", "paid")
            for position in range(rng.choices(range(1, 7), weights=LINE_COUNT_WEIGHTS)[0]):
                service = rng.choice(services)
                quantity = Decimal(rng.choice(service.quantities))
                roll = rng.random()
                discount = ZERO if roll < 0.8 else (quantity * service.rate / 10).quantize(CENT)
                figure = line_tax(
                    quantity=quantity,
                    rate=service.rate,
                    discount=discount,
                    tax_rate=service.tax_rate,
                    interstate=interstate,
                )
                line_id = rng_uuid(rng)
                billed_lines.append(
                    BilledLine(line_id, position, service.name, service.hsn_sac, service.category, service.tax_rate,
                               quantity, figure)
                )  # fmt: skip
                lines.append(
                    (line_id, invoice_id, position, service.id, service.name, service.department_id, quantity,
                     service.rate, figure.discount, service.tax_rate, service.category, service.hsn_sac,
                     figure.taxable, figure.cgst, figure.sgst, figure.igst, figure.amount, branch.id, day, billed)
                )  # fmt: skip
            totals = invoice_totals(line.figures for line in billed_lines)
            numbered = billed or (status == "cancelled" and rng.random() < 0.5)
            number = year = None
            if numbered:
                year = financial_year(day)
                numbers[branch_index, year] = numbers.get((branch_index, year), 0) + 1
                number = format_invoice_number(branch.code, year, numbers[branch_index, year])
            if status == "partially_paid" and totals.grand_total < 2 * CENT:
                status = "finalized"
            paid = ZERO
            if status == "partially_paid":
                paid = (totals.grand_total * Decimal(rng.randint(10, 90)) / 100).quantize(CENT)
                paid = min(max(paid, CENT), totals.grand_total - CENT)
            elif status == "paid":
                paid = totals.grand_total
            # The last thing that happened to the invoice: each later event is on or after its day and time.
            last_day, last_moment, last_mode, last_amount = day, created, "cash", ZERO
            if paid > 0:
                pay_day, made = day, ZERO
                for k, amount in enumerate(_split(rng, paid, rng.choice([1, 1, 1, 2, 3]))):
                    pay_day += timedelta(days=rng.choice([0, 0, 1, 7, 20]))
                    if pay_day > today:
                        break  # not paid yet: the rest of the instalments fall due after today
                    made += amount
                    mode = rng.choices(MODES, weights=MODE_WEIGHTS)[0]
                    reference = "" if mode == "cash" else f"{mode.upper()}{rng.getrandbits(40):010X}{k}"
                    recorded = datetime.combine(pay_day, time(4, 0), tzinfo=UTC) + timedelta(minutes=rng.randrange(600))
                    recorded = max(recorded, last_moment + timedelta(minutes=1))  # in the order they were paid
                    payments.append(
                        (rng_uuid(rng), invoice_id, amount, mode, reference, pay_day, recorded, "staff:cashier",
                         branch.id)
                    )  # fmt: skip
                    last_day, last_moment, last_mode, last_amount = pay_day, recorded, mode, amount
                paid = made
            credited = refunded = ZERO
            note_day = None
            if billed and rng.random() < CREDIT_SHARE:
                note_day = last_day + timedelta(days=rng.choice([0, 1, 3, 7, 14, 30]))
            if note_day is not None and note_day <= today:  # one still to come is left out
                note_at = datetime.combine(note_day, time(4, 30), tzinfo=UTC) + timedelta(minutes=rng.randrange(560))
                note_at = max(note_at, last_moment + timedelta(minutes=1))
                credits = _credit_lines(rng, billed_lines, interstate)
                note_totals = invoice_totals(figures for _, _, figures, _ in credits)
                notes.append(
                    PendingNote(rng_uuid(rng), note_day, note_at, sequence, branch_index, invoice_id,
                                rng.choice(CREDIT_REASONS), note_totals, credits)
                )  # fmt: skip
                credited = note_totals.grand_total
                refund_due = max(ZERO, paid - (totals.grand_total - credited))
                refund_day = note_day + timedelta(days=rng.choice([0, 0, 1, 3, 7]))
                if refund_due > 0 and rng.random() < REFUND_SHARE and refund_day <= today:
                    refunds.append(
                        _refund(rng, invoice_id=invoice_id, branch_id=branch.id, amount=refund_due, mode=last_mode,
                                day=refund_day, after=note_at, index=0)
                    )  # fmt: skip
                    refunded = refund_due
            elif (
                note_day is None
                and status == "paid"
                and paid == totals.grand_total
                and rng.random() < REFUND_ONLY_SHARE
            ):
                # A payment reversed (a card charge disputed), or part of what was paid handed back.
                amount = (
                    last_amount if rng.random() < 0.5 else (paid * Decimal(rng.randint(10, 50)) / 100).quantize(CENT)
                )
                refund_day = last_day + timedelta(days=rng.choice([0, 1, 2, 7, 14]))
                if refund_day <= today:
                    refunds.append(
                        _refund(rng, invoice_id=invoice_id, branch_id=branch.id, amount=max(CENT, amount),
                                mode=last_mode, day=refund_day, after=last_moment, index=0)
                    )  # fmt: skip
                    refunded = max(CENT, amount)
            if billed:
                status = settled_status(grand_total=totals.grand_total, credited=credited, paid=paid, refunded=refunded)
            cancelled = status == "cancelled"
            invoices.append(
                (invoice_id, branch.id, patients.ids[patient], day, status, number, year,
                 place_of_supply(patient_state=state, branch_state=branch.state), interstate, totals.sub_total, totals.discount, totals.taxable,
                 totals.cgst, totals.sgst, totals.igst, totals.tax, totals.grand_total, paid, credited, refunded,
                 created if numbered else None, created + timedelta(hours=2) if cancelled else None,
                 "Raised in error" if cancelled else "", created, created)
            )  # fmt: skip
        with transaction.atomic():
            totals_count["invoices"] += copy_rows("billing_invoice", INVOICE_COLUMNS, invoices, timings=timings)
            totals_count["lines"] += copy_rows("billing_lineitem", LINE_COLUMNS, lines, timings=timings)
            totals_count["payments"] += copy_rows("billing_payment", PAYMENT_COLUMNS, payments, timings=timings)
            totals_count["refunds"] += copy_rows("billing_refund", REFUND_COLUMNS, refunds, timings=timings)
    copy_rows(
        "billing_invoicenumbercounter",
        ["branch_id", "financial_year", "last_number"],
        [(branches[b].id, year, last) for (b, year), last in sorted(numbers.items())],
        timings=timings,
    )
    notes_count, lines_count = _load_credit_notes(notes, organisation=organisation, timings=timings)
    totals_count["credit_notes"], totals_count["credit_note_lines"] = notes_count, lines_count
    return totals_count


def _load_credit_notes(notes: list[PendingNote], *, organisation: Organisation, timings: Timings) -> tuple[int, int]:
    """Number the credit notes per branch and financial year in order of issue, with no gaps, and COPY them
    with their lines and the counters."""
    branches = organisation.branches
    numbers: dict[tuple[int, str], int] = {}
    note_rows, line_rows = [], []
    for note in sorted(notes, key=lambda n: (n.day, n.created_at, n.sequence)):
        year = financial_year(note.day)
        numbers[note.branch_index, year] = numbers.get((note.branch_index, year), 0) + 1
        branch = branches[note.branch_index]
        t = note.totals
        note_rows.append(
            (note.id, note.invoice_id, branch.id, format_credit_note_number(branch.code, year, numbers[note.branch_index, year]),
             year, note.day, note.reason, t.taxable, t.cgst, t.sgst, t.igst, t.tax, t.grand_total, note.created_at,
             "staff:accounts")
        )  # fmt: skip
        for position, (line_id, line, figures, quantity) in enumerate(note.lines):
            line_rows.append(
                (line_id, note.id, line.id, position, line.service_name, line.hsn_sac, line.category, line.tax_rate,
                 quantity, figures.taxable, figures.cgst, figures.sgst, figures.igst, figures.amount)
            )  # fmt: skip
    with transaction.atomic():
        copied = copy_rows("billing_creditnote", CREDIT_NOTE_COLUMNS, note_rows, timings=timings)
        lines = copy_rows("billing_creditnoteline", CREDIT_LINE_COLUMNS, line_rows, timings=timings)
        copy_rows(
            "billing_creditnotenumbercounter",
            ["branch_id", "financial_year", "last_number"],
            [(branches[b].id, year, last) for (b, year), last in sorted(numbers.items())],
            timings=timings,
        )
    return copied, lines
