"""Demo billing data for `seed_demo`: a service catalogue across departments, and at every branch invoices
in every status (draft, finalized, partially paid, paid, cancelled), intra- and inter-state. Idempotent."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from billing import services
from billing.models import BillableService, CreditNote, Invoice, Refund
from clinic.models import Branch, Department
from patients.models import Patient

# code, name, department, rate, tax category, GST rate, HSN/SAC. Healthcare services by a clinic are exempt
# (SAC 9993xx); a cosmetic procedure is not healthcare (taxable, SAC 999722); goods carry their HSN and rate.
CATALOGUE: list[tuple[str, str, str, str, str, str, str]] = [
    ("CONS-GEN", "General consultation", "General Medicine", "500.00", "exempt", "0", "999312"),
    ("CONS-FU", "Follow-up consultation", "General Medicine", "300.00", "exempt", "0", "999312"),
    ("ECG", "Electrocardiogram (ECG)", "Cardiology", "650.00", "exempt", "0", "999316"),
    ("ECHO", "2D echocardiography", "Cardiology", "2500.00", "exempt", "0", "999316"),
    ("VACC-PAED", "Vaccination (administration)", "Paediatrics", "350.00", "exempt", "0", "999312"),
    ("XRAY-LIMB", "X-ray, one limb", "Orthopaedics", "900.00", "exempt", "0", "999316"),
    ("PHYSIO", "Physiotherapy session", "Orthopaedics", "700.00", "exempt", "0", "999314"),
    ("DERM-PEEL", "Chemical peel (cosmetic)", "Dermatology", "3499.00", "taxable", "18", "999722"),
    ("MED-PCM650", "Paracetamol 650 mg, strip of 15", "Pharmacy", "34.50", "taxable", "5", "30049099"),
    ("DRESS-KIT", "Sterile dressing kit", "Pharmacy", "120.00", "taxable", "5", "30059040"),
    ("KNEE-BRACE", "Knee brace (orthopaedic appliance)", "Orthopaedics", "1450.00", "taxable", "5", "90211000"),
]


def _department(name: str) -> Department:
    return Department.objects.filter(name__iexact=name).first() or Department.objects.create(name=name)


def _catalogue() -> list[BillableService]:
    entries = []
    for code, name, department, rate, category, tax_rate, hsn_sac in CATALOGUE:
        entry, _ = BillableService.objects.get_or_create(
            code=code,
            defaults={
                "name": name,
                "department": _department(department),
                "rate": Decimal(rate),
                "tax_category": category,
                "tax_rate": Decimal(tax_rate),
                "hsn_sac": hsn_sac,
            },
        )
        entries.append(entry)
    return entries


def _line(service: BillableService, quantity: str = "1", discount: str = "0.00") -> services.LineInput:
    return services.LineInput(
        service=service,
        service_name=service.name,
        department=service.department,
        rate=service.rate,
        tax_rate=service.tax_rate,
        tax_category=service.tax_category,
        hsn_sac=service.hsn_sac,
        quantity=Decimal(quantity),
        discount=Decimal(discount),
    )


def _seed_branch(branch: Branch, patients: Sequence[Patient], catalogue: dict[str, BillableService]) -> None:
    """Six invoices at one branch: draft, finalized, partially paid (inter-state), paid, and two cancelled."""
    local = [p for p in patients if p.address_state.casefold() == branch.state.casefold()] or list(patients)
    other = [p for p in patients if p.address_state and p.address_state.casefold() != branch.state.casefold()]
    other = other or list(patients)
    today = timezone.localtime(timezone.now(), branch.zone).date()

    def create(patient: Patient, days_ago: int, lines: list[services.LineInput], finalize: bool = True) -> Invoice:
        return services.invoice_create(
            branch=branch,
            patient=patient,
            invoice_date=today - timedelta(days=days_ago),
            line_items=lines,
            finalize=finalize,
        )

    c = catalogue
    create(local[0], 0, [_line(c["CONS-GEN"]), _line(c["PHYSIO"], "0.5")], finalize=False)
    create(local[1 % len(local)], 1, [_line(c["CONS-FU"]), _line(c["ECG"])])
    partly = create(other[0], 2, [_line(c["ECHO"]), _line(c["XRAY-LIMB"], "2", "100.00")])
    services.payment_record(
        invoice=partly, amount=Decimal("1500.00"), payment_mode="upi", reference=f"UPI-{branch.code}-0001"
    )
    paid = create(
        local[2 % len(local)],
        3,
        [_line(c["VACC-PAED"], "2"), _line(c["DERM-PEEL"], "1", "499.00"), _line(c["MED-PCM650"], "2")],
    )
    services.payment_record(invoice=paid, amount=Decimal("1000.00"), payment_mode="cash", recorded_by="seed_demo")
    services.payment_record(
        invoice=paid,
        amount=paid.grand_total - Decimal("1000.00"),
        payment_mode="card",
        reference=f"CARD-{branch.code}-4242",
        recorded_by="seed_demo",
    )
    # The peel was not done after all: credited in full (its GST reversed) and the money paid back.
    peel = paid.line_items.get(service=c["DERM-PEEL"])
    note = services.credit_note_issue(
        invoice=paid,
        reason="Procedure not performed",
        lines=[services.CreditLineInput(line_id=peel.id)],
        issued_by="seed_demo",
    )
    services.refund_record(
        invoice=paid,
        amount=note.total,
        payment_mode="card",
        reference=f"RFND-{branch.code}-4242",
        recorded_by="seed_demo",
    )
    create(other[0], 1, [_line(c["KNEE-BRACE"]), _line(c["DRESS-KIT"], "2"), _line(c["CONS-GEN"])])
    wrong = create(other[1 % len(other)], 4, [_line(c["CONS-GEN"])])
    services.invoice_cancel(invoice=wrong, reason="Raised against the wrong patient")
    draft = create(local[3 % len(local)], 5, [_line(c["ECG"])], finalize=False)
    services.invoice_cancel(invoice=draft, reason="Test not performed")


@transaction.atomic
def seed_demo_billing(*, branches: Sequence[Branch], patients: Sequence[Patient]) -> dict[str, list[dict[str, Any]]]:
    """Create the catalogue and, the first time, the demo invoices; return their manifest entries."""
    catalogue = _catalogue()
    if not Invoice.objects.filter(patient__in=patients).exists():
        by_code = {entry.code: entry for entry in catalogue}
        for branch in branches:
            _seed_branch(branch, patients, by_code)
    invoices = Invoice.objects.filter(patient__in=patients).select_related("branch").order_by("branch__code", "date")
    notes = CreditNote.objects.filter(invoice__patient__in=patients).order_by("branch__code", "credit_note_number")
    refunds = Refund.objects.filter(invoice__patient__in=patients).order_by("branch__code", "recorded_at")
    return {
        "catalogue": [
            {
                "id": str(s.id),
                "code": s.code,
                "name": s.name,
                "tax_category": s.tax_category,
                "tax_rate": str(s.tax_rate.normalize()),
                "hsn_sac": s.hsn_sac,
            }
            for s in catalogue
        ],
        "invoices": [{"id": str(i.id), "name": _label(i), "status": i.status} for i in invoices],
        "credit_notes": [
            {"id": str(n.id), "name": f"{n.credit_note_number} {n.total}", "invoice_id": str(n.invoice_id)}
            for n in notes
        ],
        "refunds": [
            {"id": str(r.id), "name": f"{r.amount} {r.payment_mode} {r.refund_date}", "invoice_id": str(r.invoice_id)}
            for r in refunds
        ],
    }


def _label(invoice: Invoice) -> str:
    supply = "IGST" if invoice.interstate else "CGST+SGST"
    return f"{invoice.invoice_number or 'draft'} {invoice.date} {invoice.status} {supply} {invoice.grand_total}"
