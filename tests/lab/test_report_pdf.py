"""GET /api/v1/lab/orders/{id}.pdf: the printable laboratory report, read back with pdftotext and rendered to
PNG under test-artifacts/pdf/ (what it looks like)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from integrations.models import AuditLogEntry
from lab import selectors, services
from lab.models import LabOrder, Priority, RangeSex, ReferenceRange
from lab.report import DASH, render_lab_report
from tests.billing.factories import post_json
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, bearer, row_counts
from tests.lab.order_factories import AnalyteFactory, LabTestFactory, imaging_test
from tests.patients.factories import PatientFactory
from tests.pdf_tools import pdf_png, pdf_text

pytestmark = pytest.mark.django_db

D = Decimal
ORDERS = "/api/v1/lab/orders"


@pytest.fixture
def world(token_for: Any) -> dict[str, Any]:
    blr = BranchFactory(
        code="BLR",
        name="Bengaluru Clinic",
        state="Karnataka",
        address_line1="12 MG Road",
        city="Bengaluru",
        pincode="560001",
        phone="+918040001234",
    )
    cbc = LabTestFactory(code="CBC", name="Complete blood count", specimen_type="Whole blood (EDTA)")
    hgb = AnalyteFactory(
        test=cbc, code="HGB", name="Haemoglobin", unit="g/dL", critical_low=D("7"), critical_high=D("20"), position=0
    )
    plt = AnalyteFactory(
        test=cbc,
        code="PLT",
        name="Platelets",
        unit="10*3/uL",
        critical_low=D("20"),
        critical_high=D("1000"),
        position=1,
    )
    wbc = AnalyteFactory(test=cbc, code="WBC", name="White cells", unit="10*3/uL", position=2)
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.FEMALE, age_min_days=6570, low=D("12"), high=D("15.5"))
    ReferenceRange.objects.create(analyte=plt, sex=RangeSex.ANY, age_min_days=0, low=D("150"), high=D("450"))
    ReferenceRange.objects.create(analyte=wbc, sex=RangeSex.ANY, age_min_days=0, low=D("4"), high=D("11"))
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray")
    patient = PatientFactory(
        first_name="Anita",
        last_name="Rao",
        registration_branch=blr,
        gender="female",
        date_of_birth=timezone.localdate() - timedelta(days=30 * 365 + 10),
    )
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.add(blr)
    order = services.lab_order_create(
        branch=blr, patient=patient, doctor=doctor, tests=[cbc, xray], priority=Priority.URGENT, ordered_by="test"
    )
    services.lab_order_collect(order=order)
    return {
        "order": LabOrder.objects.get(pk=order.pk),
        "writer": token_for(["lab:write", "lab:read"], branches=[blr]),
        "reader": token_for(["lab:read"], branches=[blr]),
        "patient": patient,
        "doctor": doctor,
    }


def record(client: Any, world: dict[str, Any], results: list[dict[str, Any]], status: str, **extra: Any) -> None:
    payload = {
        "results": results,
        "performed_at": timezone.now().isoformat(),
        "performer": "K. Menon",
        "status": status,
        **extra,
    }
    response = post_json(client, world["writer"], f"{ORDERS}/{world['order'].id}/results", payload)
    assert response.status_code == 201, response.content


@pytest.fixture
def resulted(client: Any, world: dict[str, Any]) -> dict[str, Any]:
    record(
        client,
        world,
        [
            {"test": "CBC", "analyte": "HGB", "value": "11.2"},
            {"test": "CBC", "analyte": "PLT", "value": 1200},
            {"test": "CBC", "analyte": "WBC", "value": "6.5"},
        ],
        "final",
    )
    record(client, world, [{"test": "CBC", "analyte": "WBC", "value": "7.5"}], "amended", reason="Sample re-run")
    record(client, world, [{"test": "XR-CHEST", "value": "No active lung disease.\nHeart size normal."}], "preliminary")
    return world


def pdf(client: Any, world: dict[str, Any], token: str | None = None) -> Any:
    return client.get(f"{ORDERS}/{world['order'].id}.pdf", **bearer(token or world["reader"]))


def test_a_client_accepting_octet_stream_gets_the_same_report_labelled_so(client, resulted):
    url = f"{ORDERS}/{resulted['order'].id}.pdf"

    as_bytes = client.get(url, HTTP_ACCEPT="application/octet-stream", **bearer(resulted["reader"]))
    as_json = client.get(url, HTTP_ACCEPT="application/json", **bearer(resulted["reader"]))

    assert as_bytes.status_code == 200
    assert as_bytes["Content-Type"] == "application/octet-stream"
    assert as_bytes["Content-Disposition"] == f'inline; filename="{resulted["order"].order_number}.pdf"'
    assert pdf_text(as_bytes.content) == pdf_text(pdf(client, resulted).content)
    assert as_json.status_code == 406


def test_the_report_shows_the_order_its_patient_and_every_current_result(client, resulted):
    order = resulted["order"]
    response = pdf(client, resulted)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == f'inline; filename="{order.order_number}.pdf"'
    assert response["Cache-Control"] == "no-store"
    text = pdf_text(response.content, layout=True)
    for expected in (
        "Bengaluru Clinic",
        "12 MG Road, Bengaluru, 560001",
        "+918040001234",
        "LABORATORY REPORT",
        order.order_number,
        "Anita Rao",
        resulted["patient"].patient_id,
        "Female",
        "30 years",
        resulted["doctor"].name,
        "URGENT",
        "Whole blood (EDTA)",
        "Modality: XR",
        "Status: In progress",
        "No active lung disease.",
        "Heart size normal.",
        "Preliminary results are subject to change",
    ):
        assert expected in text, expected
    for item in order.items.all():
        assert item.accession_number in text
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert any(r.startswith(f"Haemoglobin 11.2 g/dL L 12 {DASH} 15.5 Final") for r in rows), rows
    assert any(r.startswith(f"Platelets 1200 10*3/uL HH (critical) 150 {DASH} 450 Final") for r in rows), rows
    assert any(r.startswith(f"White cells 7.5 10*3/uL N 4 {DASH} 11 Amended: Sample re-run") for r in rows), rows
    assert "6.5" not in text  # the superseded version is not printed
    pages = pdf_png(response.content, "lab-report")
    assert len(pages) == 1
    row = AuditLogEntry.objects.get(request_id=response["X-Request-ID"])
    assert row.patient_ids == [resulted["patient"].id]


def test_a_final_report_has_no_preliminary_note(client, world):
    record(client, world, [{"test": "CBC", "analyte": "HGB", "value": "13"}], "final")

    text = pdf_text(pdf(client, world).content)

    assert "Preliminary" not in text
    assert "13 g/dL" in text


def test_render_lab_report_returns_the_whole_file(world):
    order = selectors.lab_order_load(world["order"].id)

    content = render_lab_report(order)

    assert content.startswith(b"%PDF-")
    assert content.rstrip().endswith(b"%%EOF")


def test_another_branchs_order_is_404_and_the_scopes_are_checked(client, world, token_for):
    mum = BranchFactory(code="MUM", state="Maharashtra")
    outsider = token_for(["lab:read"], branches=[mum])
    writer_only = token_for(["lab:write"], branches=[world["order"].branch])
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    hidden = pdf(client, world, outsider)
    assert_problem(hidden, 404, "not_found")
    assert AuditLogEntry.objects.get(request_id=hidden["X-Request-ID"]).patient_ids == []
    assert pdf(client, world, writer_only).status_code == 403
    assert client.get(f"{ORDERS}/{world['order'].id}.pdf").status_code == 401
    assert_problem(client.get(f"{ORDERS}/not-a-uuid.pdf", **bearer(world["reader"])), 404, "not_found")
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts
