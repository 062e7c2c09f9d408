"""Migration 0006 (billing for accountants) classifies what existed before it, as its docstring says: rate-0
catalogue entries become exempt healthcare services with the SAC of their department's kind, entries with a
rate stay taxable without a code and are printed for review, lines take their category from their rate and
the code of their catalogue entry, invoices start with nothing credited or refunded, and the invoice rollup's
`outstanding` is backfilled; every constraint holds on the result. Run against the real test database with
Django's migration executor, from rows written with the old schema."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps as current_apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from billing import services
from billing.models import (
    BillableService,
    CreditNote,
    CreditRollup,
    Invoice,
    InvoiceRollup,
    LineItem,
    Payment,
    Refund,
    RefundRollup,
)
from tests.factories import BranchFactory, DepartmentFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("billing", "0005_records_never_deleted")]
AFTER = [("billing", "0006_accounting")]
D = Decimal
ZERO = D("0.00")
OCTOBER, SEPTEMBER = date(2026, 10, 5), date(2026, 9, 20)


_states: dict[str, Any] = {}


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to `targets`; returns the historical apps of that state (rendered once: it is the slow part)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    key = repr(targets)
    if key not in _states:
        _states[key] = executor.loader.project_state(targets).apps
    return _states[key]


@pytest.fixture
def executor_back_to_latest() -> Iterator[None]:
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


Line = tuple[Any, str, Any, Decimal, Decimal]  # catalogue entry (or None), name, department, rate, tax rate


def old_invoice(old: Any, *, branch: Any, patient: Any, day: date, number: str, lines: list[Line]) -> Any:
    """A finalized invoice written with the old schema (no categories, no codes), one unit per line, its
    totals the sums of its lines, all intra-state (CGST + SGST halves)."""
    taxable = sum((rate for *_, rate, _ in lines), ZERO)
    half = sum((rate * tax_rate / 200 for *_, rate, tax_rate in lines), ZERO).quantize(D("0.01"))
    invoice = old.get_model("billing", "Invoice").objects.create(
        branch_id=branch.id,
        patient_id=patient.id,
        date=day,
        status="finalized",
        invoice_number=number,
        financial_year="2026-27",
        place_of_supply="Karnataka",
        interstate=False,
        sub_total=taxable,
        taxable=taxable,
        cgst=half,
        sgst=half,
        tax=2 * half,
        grand_total=taxable + 2 * half,
        finalized_at=datetime(day.year, day.month, day.day, 6, 30, tzinfo=UTC),
    )
    for position, (service, name, department, rate, tax_rate) in enumerate(lines):
        line_half = (rate * tax_rate / 200).quantize(D("0.01"))
        old.get_model("billing", "LineItem").objects.create(
            invoice_id=invoice.id,
            position=position,
            service_id=service.id if service else None,
            service_name=name,
            department_id=department.id,
            rate=rate,
            tax_rate=tax_rate,
            taxable_amount=rate,
            cgst=line_half,
            sgst=line_half,
            amount=rate + 2 * line_half,
            branch_id=branch.id,
            invoice_date=day,
            billed=True,
        )
    return invoice


def old_payment(old: Any, invoice: Any, amount: Decimal, *, mode: str = "cash", reference: str = "") -> None:
    old.get_model("billing", "Payment").objects.create(
        invoice_id=invoice.id,
        branch_id=invoice.branch_id,
        amount=amount,
        payment_mode=mode,
        reference=reference,
        payment_date=invoice.date,
        recorded_by="system",
    )
    invoice.paid += amount
    invoice.status = "paid" if invoice.paid == invoice.grand_total else "partially_paid"
    invoice.save(update_fields=["paid", "status"])


def test_existing_catalogue_lines_invoices_and_rollups_are_classified_and_every_constraint_holds(
    executor_back_to_latest, capsys
):
    old = migrate(BEFORE)
    branch = BranchFactory(code="BLR", state="Karnataka")
    patient = PatientFactory(registration_branch=branch, address_state="Karnataka")
    radiology, medicine, physio, dermatology, lab = (
        DepartmentFactory(name=name)
        for name in ("Radiology", "General Medicine", "Physiotherapy", "Dermatology", "Clinical Pathology Lab")
    )
    old_service = old.get_model("billing", "BillableService").objects.create
    xray = old_service(code="XRAY-CHEST", name="Chest X-ray", department_id=radiology.id, rate=D("600.00"))
    consultation = old_service(code="CONS-GEN", name="Consultation", department_id=medicine.id, rate=D("500.00"))
    session = old_service(code="PHYSIO-30", name="Physiotherapy session", department_id=physio.id, rate=D("700.00"))
    peel = old_service(
        code="DERM-PEEL", name="Chemical peel", department_id=dermatology.id, rate=D("2000.00"), tax_rate=D("18.00")
    )
    old_service(code="LAB-CBC", name="Complete blood count", department_id=lab.id, rate=D("350.00"))
    old_service(
        code="DERM-KIT", name="Skin care kit", department_id=dermatology.id, rate=D("800.00"), tax_rate=D("12.00")
    )
    october = old_invoice(
        old,
        branch=branch,
        patient=patient,
        day=OCTOBER,
        number="BLR/2026-27/00002",
        lines=[
            (xray, "Chest X-ray", radiology, D("600.00"), ZERO),
            (peel, "Chemical peel", dermatology, D("2000.00"), D("18.00")),
        ],
    )
    september = old_invoice(
        old,
        branch=branch,
        patient=patient,
        day=SEPTEMBER,
        number="BLR/2026-27/00001",
        lines=[
            (consultation, "Consultation", medicine, D("500.00"), ZERO),
            (session, "Physiotherapy session", physio, D("700.00"), ZERO),
            (None, "Dressing", medicine, D("150.00"), ZERO),  # free text, no catalogue entry
        ],
    )
    old_payment(old, october, D("960.00"))
    old_payment(old, september, D("1350.00"), mode="upi", reference="UPI-77")
    assert (october.grand_total, october.status, september.status) == (D("2960.00"), "partially_paid", "paid")
    before = {row["id"]: row for row in old.get_model("billing", "Invoice").objects.values()}
    capsys.readouterr()

    migrate(AFTER)

    # The catalogue: rate 0 is exempt with its department's SAC; a rate stays taxable, uncoded, for review.
    assert {s.code: (s.tax_category, s.tax_rate, s.hsn_sac) for s in BillableService.objects.all()} == {
        "CONS-GEN": ("exempt", ZERO, "999312"),
        "DERM-KIT": ("taxable", D("12.00"), ""),
        "DERM-PEEL": ("taxable", D("18.00"), ""),
        "LAB-CBC": ("exempt", ZERO, "999316"),
        "PHYSIO-30": ("exempt", ZERO, "999314"),
        "XRAY-CHEST": ("exempt", ZERO, "999316"),
    }
    printed = capsys.readouterr().out
    assert [line.strip() for line in printed.splitlines() if "billing:" in line] == [
        "billing: review catalogue entry DERM-KIT (Skin care kit): taxable at 12.00% with no HSN/SAC; "
        "classify it in the admin.",
        "billing: review catalogue entry DERM-PEEL (Chemical peel): taxable at 18.00% with no HSN/SAC; "
        "classify it in the admin.",
    ]

    # The lines: the category from the rate, the code of the catalogue entry (none without one).
    assert {
        (line.invoice_id, line.service_name): (line.tax_category, line.tax_rate, line.hsn_sac)
        for line in LineItem.objects.all()
    } == {
        (october.id, "Chest X-ray"): ("exempt", ZERO, "999316"),
        (october.id, "Chemical peel"): ("taxable", D("18.00"), ""),
        (september.id, "Consultation"): ("exempt", ZERO, "999312"),
        (september.id, "Physiotherapy session"): ("exempt", ZERO, "999314"),
        (september.id, "Dressing"): ("exempt", ZERO, ""),
    }

    # The invoices: nothing credited or refunded, everything else as it was.
    for row in Invoice.objects.values():
        assert (row.pop("credited"), row.pop("refunded")) == (ZERO, ZERO)
        assert row == before[row["id"]]
    assert not CreditNote.objects.exists()
    assert not Refund.objects.exists()
    assert Payment.objects.count() == 2

    # The invoice rollup: what each invoice's day and month still ask (grand total - paid).
    assert {
        (row.period, row.period_start): (row.billed, row.outstanding)
        for row in InvoiceRollup.objects.filter(branch_id=branch.id)
    } == {
        ("day", OCTOBER): (D("2960.00"), D("2000.00")),
        ("month", date(2026, 10, 1)): (D("2960.00"), D("2000.00")),
        ("day", SEPTEMBER): (D("1350.00"), ZERO),
        ("month", date(2026, 9, 1)): (D("1350.00"), ZERO),
    }
    assert not CreditRollup.objects.exists()
    assert not RefundRollup.objects.exists()

    # Every constraint the models declare is in the database, validated, and holds for every row.
    assert_every_constraint_holds()

    # ... and the migrated invoice is credited like any other: the rollup follows.
    xray_line = LineItem.objects.get(service_name="Chest X-ray")
    note = services.credit_note_issue(
        invoice=Invoice.objects.get(pk=october.id),
        reason="Repeated by mistake",
        lines=[services.CreditLineInput(xray_line.id)],
    )
    assert (note.total, note.lines.get().hsn_sac, note.lines.get().tax_category) == (D("600.00"), "999316", "exempt")
    assert InvoiceRollup.objects.get(branch_id=branch.id, period="day", period_start=OCTOBER).outstanding == D(
        "1400.00"
    )
    assert_every_constraint_holds()


def assert_every_constraint_holds() -> None:
    declared = {
        constraint.name: model
        for model in current_apps.get_app_config("billing").get_models()
        for constraint in model._meta.constraints
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname, convalidated FROM pg_constraint WHERE conrelid::regclass::text LIKE 'billing\\_%%'"
        )
        in_database = dict(cursor.fetchall())
        # A conditional unique constraint is a unique index (valid from its creation).
        cursor.execute("SELECT indexname, true FROM pg_indexes WHERE tablename LIKE 'billing\\_%%'")
        in_database.update(cursor.fetchall())
    assert {name: in_database.get(name) for name in declared} == dict.fromkeys(declared, True)
    for model in {*declared.values()}:
        for row in model._default_manager.all():
            row.validate_constraints()
