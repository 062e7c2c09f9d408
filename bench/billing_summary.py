"""Financial summary latency over N generated invoices (default 100,000), concurrency 1.

    .venv/bin/python bench/billing_summary.py [--invoices 100000] [--runs 30] [--explain]
                                              [--database clinic_bench_billing] [--existing] [--no-http]

Uses its own database (clinic_bench_billing, or --database). With --existing it measures the data already
there (e.g. a copy of the generate_scale_data database) and generates nothing. Invoices (about 3 lines
each, payments on the finalized ones) are generated with clinic.lib.tax's arithmetic and loaded with COPY,
with numbers, statuses and paid sums that satisfy every constraint. Times billing.selectors.billing_summary
in-process, the same SQL statements replayed through psycopg (the raw-SQL limit), and
GET /api/v1/billing/summary under gunicorn (unless --no-http), for one branch and for all branches over a
month and a year, as p50/p95 over --runs calls after a warm-up.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import requests
from harness import bench_client, gunicorn, measure, prepare, token, write

BRANCHES = [
    ("BLR", "Bengaluru", "Karnataka"),
    ("MUM", "Mumbai", "Maharashtra"),
    ("CHN", "Chennai", "Tamil Nadu"),
    ("DEL", "Delhi", "Delhi"),
    ("HYD", "Hyderabad", "Telangana"),
]
DEPARTMENTS = [
    "General Medicine",
    "Cardiology",
    "Paediatrics",
    "Orthopaedics",
    "Dermatology",
    "Radiology",
    "Pathology",
    "Physiotherapy",
]
MODES = ["cash", "card", "upi", "neft", "cheque", "online", "insurance"]
FIRST_DAY = date(2025, 4, 1)
DAYS = 600  # 2025-04-01 .. 2026-11-21
PATIENTS = 20_000
INVOICE_COLUMNS = (
    "id, branch_id, patient_id, date, status, invoice_number, financial_year, place_of_supply, interstate, "
    "sub_total, discount, taxable, cgst, sgst, igst, tax, grand_total, paid, finalized_at, cancelled_at, "
    "cancellation_reason, created_at, updated_at"
)
LINE_COLUMNS = (
    "id, invoice_id, position, service_id, service_name, department_id, quantity, rate, discount, tax_rate, "
    "taxable_amount, cgst, sgst, igst, amount, branch_id, invoice_date, billed"
)
PAYMENT_COLUMNS = "id, invoice_id, amount, payment_mode, reference, payment_date, recorded_at, recorded_by, branch_id"


def generate(count: int, seed: int = 11) -> None:
    """Generate `count` invoices with lines and payments, and COPY them in."""
    from django.db import connection

    from billing.models import Invoice, InvoiceNumberCounter
    from billing.numbering import financial_year, format_invoice_number
    from clinic.lib.tax import invoice_totals, is_interstate, line_tax
    from clinic.models import Branch, Department
    from patients.devdata.demo import bench_patients_build, bulk_insert
    from patients.models import Patient

    rng = random.Random(seed)
    branches = [
        Branch.objects.get_or_create(code=code, defaults={"name": name, "state": state})[0]
        for code, name, state in BRANCHES
    ]
    departments = [Department.objects.get_or_create(name=name)[0] for name in DEPARTMENTS]
    if Patient.objects.count() < PATIENTS:
        bulk_insert(bench_patients_build(PATIENTS, branches=branches, seed=seed))
    patients = list(Patient.objects.values_list("id", "address_state")[:PATIENTS])
    started = time.perf_counter()
    invoices: list[tuple[Any, ...]] = []
    lines: list[tuple[Any, ...]] = []
    payments: list[tuple[Any, ...]] = []
    numbers: dict[tuple[Any, str], int] = {}
    days = sorted(FIRST_DAY + timedelta(days=rng.randrange(DAYS)) for _ in range(count))
    for day in days:
        branch = rng.choice(branches)
        patient_id, patient_state = rng.choice(patients)
        interstate = is_interstate(patient_state=patient_state, branch_state=branch.state)
        invoice_id = uuid.uuid4()
        figures, first_line = [], len(lines)
        for position in range(rng.choice([1, 2, 3, 3, 4, 5])):
            quantity = Decimal(rng.choice(["1", "1", "2", "0.5", "1.5", "3"]))
            rate = Decimal(rng.randint(100, 500_000)) / 100
            discount = rng.choice([Decimal("0.00"), Decimal("0.00"), (quantity * rate / 10).quantize(Decimal("0.01"))])
            tax_rate = Decimal(rng.choice([0, 0, 5, 12, 18]))
            figure = line_tax(quantity=quantity, rate=rate, discount=discount, tax_rate=tax_rate, interstate=interstate)
            figures.append(figure)
            lines.append(
                (
                    uuid.uuid4(),
                    invoice_id,
                    position,
                    None,
                    f"Service {position}",
                    rng.choice(departments).id,
                    quantity,
                    rate,
                    figure.discount,
                    tax_rate,
                    figure.taxable,
                    figure.cgst,
                    figure.sgst,
                    figure.igst,
                    figure.amount,
                )
            )
        totals = invoice_totals(figures)
        roll = rng.random()
        status = (
            "draft"
            if roll < 0.05
            else "cancelled"
            if roll < 0.08
            else "finalized"
            if roll < 0.28
            else "partially_paid"
            if roll < 0.45
            else "paid"
        )
        moment = datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=rng.randint(4, 14))
        number = year = None
        if status != "draft" and not (status == "cancelled" and rng.random() < 0.5):
            year = financial_year(day)
            numbers[branch.id, year] = numbers.get((branch.id, year), 0) + 1
            number = format_invoice_number(branch.code, year, numbers[branch.id, year])
        paid = Decimal("0.00")
        if status == "partially_paid":
            paid = max(
                Decimal("0.01"), (totals.grand_total * Decimal(rng.randint(10, 90)) / 100).quantize(Decimal("0.01"))
            )
            if paid >= totals.grand_total:
                status, paid = "finalized", Decimal("0.00")
        elif status == "paid":
            paid = totals.grand_total
        billed = status in ("finalized", "partially_paid", "paid")
        lines[first_line:] = [(*row, branch.id, day, billed) for row in lines[first_line:]]
        remaining, k = paid, 0
        while remaining > 0:
            amount = (
                remaining if rng.random() < 0.6 else max(Decimal("0.01"), (remaining / 2).quantize(Decimal("0.01")))
            )
            mode = rng.choice(MODES)
            payments.append(
                (
                    uuid.uuid4(),
                    invoice_id,
                    amount,
                    mode,
                    "" if mode == "cash" else f"{mode.upper()}-{invoice_id.hex[:12]}-{k}",
                    min(day + timedelta(days=rng.randint(0, 30)), FIRST_DAY + timedelta(days=DAYS)),
                    moment,
                    "bench",
                    branch.id,
                )
            )
            remaining -= amount
            k += 1
        invoices.append(
            (
                invoice_id,
                branch.id,
                patient_id,
                day,
                status,
                number,
                year,
                patient_state if interstate else branch.state,
                interstate,
                totals.sub_total,
                totals.discount,
                totals.taxable,
                totals.cgst,
                totals.sgst,
                totals.igst,
                totals.tax,
                totals.grand_total,
                paid,
                moment if number else None,
                moment if status == "cancelled" else None,
                "bench" if status == "cancelled" else "",
                moment,
                moment,
            )
        )
    generated = time.perf_counter() - started
    started = time.perf_counter()
    raw = connection.connection
    assert raw is not None
    with raw.cursor() as cursor:
        for table, columns, rows in (
            ("billing_invoice", INVOICE_COLUMNS, invoices),
            ("billing_lineitem", LINE_COLUMNS, lines),
            ("billing_payment", PAYMENT_COLUMNS, payments),
        ):
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
    InvoiceNumberCounter.objects.bulk_create(
        [InvoiceNumberCounter(branch_id=b, financial_year=y, last_number=n) for (b, y), n in numbers.items()],
        update_conflicts=True,
        unique_fields=["branch", "financial_year"],
        update_fields=["last_number"],
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE billing_invoice")
        cursor.execute("VACUUM ANALYZE billing_lineitem")
        cursor.execute("VACUUM ANALYZE billing_payment")
    print(
        f"generated {len(invoices)} invoices, {len(lines)} lines, {len(payments)} payments in {generated:.1f} s; "
        f"COPY and ANALYZE {time.perf_counter() - started:.1f} s; total invoices now {Invoice.objects.count()}"
    )


def cases() -> list[tuple[str, dict[str, Any]]]:
    from clinic.models import Branch

    blr = Branch.objects.get(code="BLR")
    return [
        ("one branch, one month", {"date_from": date(2026, 10, 1), "date_to": date(2026, 10, 31), "branch_id": blr.id}),
        ("one branch, one year", {"date_from": date(2025, 4, 1), "date_to": date(2026, 3, 31), "branch_id": blr.id}),
        ("all branches, one month", {"date_from": date(2026, 10, 1), "date_to": date(2026, 10, 31)}),
        ("all branches, one year", {"date_from": date(2025, 4, 1), "date_to": date(2026, 3, 31)}),
        # As bench/scale_workload.py asks: 366 days to "today", starting and ending mid-month.
        ("all branches, 2025-11-20 to 2026-11-20", {"date_from": date(2025, 11, 20), "date_to": date(2026, 11, 20)}),
    ]


def explain(params: dict[str, Any]) -> None:
    """EXPLAIN ANALYZE of the three aggregate queries the selector runs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from billing.selectors import billing_summary
    from integrations.models import ApiClient

    client = ApiClient(name="explain")
    client.__dict__["_clinic_branch_ids"] = None
    with CaptureQueriesContext(connection) as captured:
        billing_summary(client=client, **params)
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            if "billing_" not in query["sql"]:
                continue
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + query["sql"])
            print("\n".join(row[0] for row in cursor.fetchall()), end="\n\n")


def raw_sql(params: dict[str, Any]) -> Callable[[], Any]:
    """The statements one selector call runs, replayed through psycopg without Django."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        in_process(params)()
    statements = [query["sql"] for query in captured.captured_queries]
    raw = connection.connection
    assert raw is not None

    def call() -> None:
        with raw.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql.encode())
                cursor.fetchall()

    return call


def in_process(params: dict[str, Any]) -> Callable[[], Any]:
    from billing.selectors import billing_summary
    from integrations.models import ApiClient

    client = ApiClient(name="bench")
    client.__dict__["_clinic_branch_ids"] = None  # unrestricted, as clinic.selectors caches it per request

    def call() -> Any:
        return billing_summary(client=client, **params)

    return call


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--invoices", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--database", default="clinic_bench_billing")
    parser.add_argument("--existing", action="store_true", help="Measure the data already there; generate nothing.")
    parser.add_argument("--no-http", action="store_true", help="Skip the API under gunicorn.")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    server = prepare(database=args.database)
    import django

    django.setup()
    from billing.models import Invoice

    missing = args.invoices - Invoice.objects.count()
    if missing > 0 and not args.existing:
        generate(missing)
    print(f"{Invoice.objects.count()} invoices in {args.database}; load average {os.getloadavg()}")
    rows = [measure(f"billing_summary() {label}", in_process(params), args.runs) for label, params in cases()]
    rows += [measure(f"raw SQL (psycopg) {label}", raw_sql(params), args.runs) for label, params in cases()]
    if args.explain:
        for label, params in cases():
            print(f"--- {label}")
            explain(params)
    if args.no_http:
        del server
        write(f"billing_summary_{args.database}", rows)
        return 0
    client = bench_client("billing:read")
    with gunicorn() as base:
        session = requests.Session()
        headers = {"Authorization": f"Bearer {token(session, base, client)}"}

        def over_http(params: dict[str, Any]) -> Callable[[], None]:
            query = {key: str(value) for key, value in params.items()}
            return lambda: session.get(
                f"{base}/api/v1/billing/summary", params=query, headers=headers
            ).raise_for_status()

        rows += [
            measure(f"GET /api/v1/billing/summary {label}", over_http(params), args.runs) for label, params in cases()
        ]
    del server
    write(f"billing_summary_{args.database if args.existing else args.invoices}", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
