"""GST tax invoice PDF latency: a 10-line finalized, partly paid invoice, one process, concurrency 1.

    .venv/bin/python bench/pdf.py [--renders 200] [--lines 10] [--database clinic_bench_pdf] [--no-http]

Uses its own database (clinic_bench_pdf, or --database), where it creates the branch, patient and invoice
through billing.services on first use. Measures, as p50/p95/p99 over --renders calls after a warm-up:
billing.document_pdf.render_pdf of the built document (ReportLab alone); the invoice loaded with everything its
detail shows (the queries of billing.selectors.invoice_get(detail=True)), built (billing.documents) and
rendered, as the API handler does; and GET /api/v1/billing/invoices/{id}.pdf under gunicorn (unless --no-http). The target is a p95 of
150 ms for the whole request.
"""

from __future__ import annotations

import argparse
import os
from datetime import date
from decimal import Decimal
from typing import Any

import requests
from harness import bench_client, gunicorn, measure, prepare, token, write


def invoice_of(lines: int) -> Any:
    """The benchmark's invoice of `lines` lines (made the first time), with a UPI payment."""
    from billing import services
    from billing.models import Invoice
    from clinic.models import Branch, Department
    from patients.models import Patient
    from patients.services import patient_create

    branch, _ = Branch.objects.get_or_create(
        code="BPDF",
        defaults={
            "name": "Bengaluru Central Clinic",
            "state": "Karnataka",
            "gstin": "29AABCC1234D1Z7",
            "address_line1": "12 MG Road",
            "city": "Bengaluru",
            "pincode": "560001",
            "phone": "+918040001234",
        },
    )
    existing = Invoice.objects.filter(branch=branch, line_items__isnull=False).distinct()
    for invoice in existing:
        if invoice.line_items.count() == lines:
            return invoice
    department, _ = Department.objects.get_or_create(name="General Medicine")
    patient = Patient.objects.filter(registration_branch=branch).first() or patient_create(
        branch=branch,
        data={
            "first_name": "Priya",
            "last_name": "Sharma",
            "date_of_birth": date(1984, 3, 12),
            "gender": "female",
            "phone": "+919876543210",
            "address": {"line1": "4 Residency Road", "city": "Bengaluru", "state": "Karnataka", "pincode": "560025"},
        },
    )
    items = [
        services.LineInput(
            service_name=f"Physiotherapy session {n}" if n % 2 else f"Dressing kit, sterile, size {n}",
            department=department,
            rate=Decimal("750.00") + n,
            tax_rate=Decimal(18) if n % 2 else Decimal(0),
            quantity=Decimal(1 + n % 3),
            discount=Decimal("25.00") if n % 4 == 0 else Decimal("0.00"),
            hsn_sac="999312" if n % 2 else "3005",
        )
        for n in range(1, lines + 1)
    ]
    invoice = services.invoice_create(branch=branch, patient=patient, line_items=items, finalize=True)
    services.payment_record(
        invoice=invoice, amount=Decimal("1000.00"), payment_mode="upi", reference="UPI-BENCH", payment_date=None
    )
    return invoice


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--renders", type=int, default=200)
    parser.add_argument("--lines", type=int, default=10)
    parser.add_argument("--database", default="clinic_bench_pdf")
    parser.add_argument("--no-http", action="store_true", help="Skip the API under gunicorn.")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    server = prepare(database=args.database)
    import django

    django.setup()
    from billing.document_pdf import render_pdf
    from billing.documents import invoice_document
    from billing.selectors import invoice_detail_load

    invoice = invoice_of(args.lines)
    document = invoice_document(invoice_detail_load(invoice.id))
    size = len(render_pdf(document))
    print(f"{args.lines}-line invoice {invoice.invoice_number}: {size} bytes; load average {os.getloadavg()}")

    def load_build_render() -> bytes:
        return render_pdf(invoice_document(invoice_detail_load(invoice.id)))

    label = f"{args.lines} lines"
    rows = [
        measure(f"render_pdf() {label}", lambda: render_pdf(document), args.renders),
        measure(f"load + build + render_pdf() {label}", load_build_render, args.renders),
    ]
    if not args.no_http:
        client = bench_client("billing:read")
        with gunicorn() as base:
            session = requests.Session()
            headers = {"Authorization": f"Bearer {token(session, base, client)}"}
            url = f"{base}/api/v1/billing/invoices/{invoice.id}.pdf"
            rows.append(
                measure(
                    f"GET /api/v1/billing/invoices/{{id}}.pdf {label}",
                    lambda: session.get(url, headers=headers).raise_for_status(),
                    args.renders,
                )
            )
    del server
    write(f"pdf_{args.lines}_lines", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
