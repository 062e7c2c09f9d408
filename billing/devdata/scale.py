"""Scale data (issue 7): the service catalogue, invoices with 1-6 lines across departments, payments in
every mode, and the invoice number counters, loaded with COPY.

Figures come from billing.tax, so stored totals are exactly what the services would compute. Invoices are
numbered in date order per branch and financial year with no gaps (a cancelled finalized invoice keeps its
number); `paid` is the exact sum of the payments and the status follows from it, as the constraints demand.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction

from billing.numbering import financial_year, format_invoice_number
from billing.tax import LineTax, invoice_totals, is_interstate, line_tax
from clinic.devdata.scale import Organisation, Timings, copy_rows, rng_uuid
from patients.devdata.scale import Patients

CHUNK_INVOICES = 25_000
CENT = Decimal("0.01")
ZERO = Decimal("0.00")
# (name suffix, code suffix, rate range in rupees, GST rate, quantities)
SERVICE_KINDS = [
    ("consultation", "CONS", (400, 1500), Decimal(0), ["1"]),
    ("follow-up consultation", "FUP", (200, 800), Decimal(0), ["1"]),
    ("diagnostic test", "TEST", (300, 6000), Decimal(12), ["1", "1", "2"]),
    ("procedure", "PROC", (1500, 40000), Decimal(18), ["1"]),
    ("consumables", "CONSUM", (50, 900), Decimal(5), ["1", "2", "3", "5", "0.5"]),
]
MODES = ["cash", "upi", "card", "insurance", "neft", "online", "cheque"]
MODE_WEIGHTS = [30, 30, 20, 7, 5, 5, 3]
STATUS_WEIGHTS = [("draft", 3), ("cancelled", 3), ("finalized", 12), ("partially_paid", 10), ("paid", 72)]
LINE_COUNT_WEIGHTS = [30, 25, 20, 12, 8, 5]
INVOICE_COLUMNS = [
    "id", "branch_id", "patient_id", "date", "status", "invoice_number", "financial_year", "place_of_supply",
    "interstate", "sub_total", "discount", "taxable", "cgst", "sgst", "igst", "tax", "grand_total", "paid",
    "finalized_at", "cancelled_at", "cancellation_reason", "created_at", "updated_at",
]  # fmt: skip
LINE_COLUMNS = [
    "id", "invoice_id", "position", "service_id", "service_name", "department_id", "quantity", "rate", "discount",
    "tax_rate", "taxable_amount", "cgst", "sgst", "igst", "amount", "branch_id", "invoice_date", "billed",
]  # fmt: skip
PAYMENT_COLUMNS = [
    "id", "invoice_id", "amount", "payment_mode", "reference", "payment_date", "recorded_at", "recorded_by",
    "branch_id",
]  # fmt: skip


def generate_catalogue(
    rng: random.Random, *, organisation: Organisation, moment: datetime, timings: Timings
) -> list[tuple[Any, ...]]:
    """Five services per department; returns (id, name, department id, rate, tax rate, quantities) each."""
    services, rows = [], []
    for department_id, department in zip(organisation.departments, organisation.department_names, strict=True):
        prefix = department.replace(" ", "")[:4].upper()
        for suffix, code, (low, high), tax_rate, quantities in SERVICE_KINDS:
            service_id = rng_uuid(rng)
            name = f"{department} {suffix}"
            rate = Decimal(rng.randint(low, high) * 10) / 10
            services.append((service_id, name, department_id, rate, tax_rate, quantities))
            rows.append((service_id, f"{prefix}-{code}", name, department_id, rate, tax_rate, True, moment, moment))
    copy_rows(
        "billing_billableservice",
        ["id", "code", "name", "department_id", "rate", "tax_rate", "active", "created_at", "updated_at"],
        rows,
        timings=timings,
    )
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


def generate_invoices(
    rng: random.Random,
    *,
    organisation: Organisation,
    patients: Patients,
    services: Sequence[tuple[Any, ...]],
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
    totals_count = {"invoices": 0, "lines": 0, "payments": 0}
    for chunk_start in range(0, len(plan), CHUNK_INVOICES):
        invoices, lines, payments = [], [], []
        for day, _, patient, branch_index in plan[chunk_start : chunk_start + CHUNK_INVOICES]:
            branch = branches[branch_index]
            state = patients.states[patient]
            interstate = is_interstate(patient_state=state, branch_state=branch.state)
            invoice_id = rng_uuid(rng)
            created = datetime.combine(day, time(3, 30), tzinfo=UTC) + timedelta(minutes=rng.randrange(600))
            figures: list[LineTax] = []
            status = rng.choices(statuses, weights=status_weights)[0]
            billed = status in ("finalized", "partially_paid", "paid")
            for position in range(rng.choices(range(1, 7), weights=LINE_COUNT_WEIGHTS)[0]):
                service_id, name, department_id, rate, tax_rate, quantities = rng.choice(services)
                quantity = Decimal(rng.choice(quantities))
                roll = rng.random()
                discount = ZERO if roll < 0.8 else (quantity * rate / 10).quantize(CENT)
                figure = line_tax(
                    quantity=quantity, rate=rate, discount=discount, tax_rate=tax_rate, interstate=interstate
                )
                figures.append(figure)
                lines.append(
                    (rng_uuid(rng), invoice_id, position, service_id, name, department_id, quantity, rate,
                     figure.discount, tax_rate, figure.taxable, figure.cgst, figure.sgst, figure.igst, figure.amount,
                     branch.id, day, billed)
                )  # fmt: skip
            totals = invoice_totals(figures)
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
            if paid > 0:
                pay_day = day
                for k, amount in enumerate(_split(rng, paid, rng.choice([1, 1, 1, 2, 3]))):
                    pay_day = min(today, pay_day + timedelta(days=rng.choice([0, 0, 1, 7, 20])))
                    mode = rng.choices(MODES, weights=MODE_WEIGHTS)[0]
                    reference = "" if mode == "cash" else f"{mode.upper()}{rng.getrandbits(40):010X}{k}"
                    recorded = datetime.combine(pay_day, time(4, 0), tzinfo=UTC) + timedelta(minutes=rng.randrange(600))
                    payments.append(
                        (rng_uuid(rng), invoice_id, amount, mode, reference, pay_day, max(recorded, created),
                         "staff:cashier", branch.id)
                    )  # fmt: skip
            cancelled = status == "cancelled"
            invoices.append(
                (invoice_id, branch.id, patients.ids[patient], day, status, number, year,
                 state if interstate else branch.state, interstate, totals.sub_total, totals.discount, totals.taxable,
                 totals.cgst, totals.sgst, totals.igst, totals.tax, totals.grand_total, paid,
                 created if numbered else None, created + timedelta(hours=2) if cancelled else None,
                 "Raised in error" if cancelled else "", created, created)
            )  # fmt: skip
        with transaction.atomic():
            totals_count["invoices"] += copy_rows("billing_invoice", INVOICE_COLUMNS, invoices, timings=timings)
            totals_count["lines"] += copy_rows("billing_lineitem", LINE_COLUMNS, lines, timings=timings)
            totals_count["payments"] += copy_rows("billing_payment", PAYMENT_COLUMNS, payments, timings=timings)
    copy_rows(
        "billing_invoicenumbercounter",
        ["branch_id", "financial_year", "last_number"],
        [(branches[b].id, year, last) for (b, year), last in sorted(numbers.items())],
        timings=timings,
    )
    return totals_count
