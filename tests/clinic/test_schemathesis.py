"""A bounded schemathesis run (every phase: examples, coverage, fuzzing, stateful) against a live server
on the real PostgreSQL and Redis, seeded with a branch, doctors with weekly sessions, patients, a service
catalogue and invoices, with a token holding every scope. It must find no failure of: no 5xx, only
documented status codes, documented content types, bodies that match the response schemas, and the
documented required headers. The stateful phase follows the document's links (create -> the operations
that take the new id); generated bookings and invoices rarely name a seeded patient and a free cell, so a
second run of that phase alone pins the create bodies to seeded ids and free cells and proves that it
reaches successful reschedules and payments (schemathesis also infers links from Location headers, so this
shows the reach, not that our declared links are the path; their declaration has its own test).

Bounded by SCHEMATHESIS_MAX_EXAMPLES (default 3) per operation and phase, and a seed, so the run takes
a couple of minutes and a failure reproduces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from integrations.clients.scopes import SCOPES
from tests.appointments.lifecycle_helpers import make_clinic
from tests.billing.factories import BillableServiceFactory, make_invoice, pay
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    ]
)


def _document() -> dict[str, Any]:
    """The served document, without the optional Idempotency-Key header: generated keys recur with other
    bodies, so nearly every write became a 422 idempotency_key_reused and nothing was created for the
    stateful phase to follow (the header has its own tests in tests/clinic/test_idempotency.py)."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    for item in document["paths"].values():
        for operation in item.values():
            parameters = [p for p in operation.get("parameters", []) if p["name"] != "Idempotency-Key"]
            operation["parameters"] = parameters
    return document


@pytest.fixture
def seeded_token(token_for: Any, settings: Any) -> str:
    settings.ANONYMOUS_RATE_LIMIT = 100_000
    clinic = make_clinic(token_for)
    for index in range(3):
        PatientFactory(first_name=f"Seeded{index}", last_name="Patient", registration_branch=clinic.branch)
    BillableServiceFactory(code="CONS-GEN")
    invoice = make_invoice(branch=clinic.branch, patient=clinic.patient)
    make_invoice(branch=clinic.branch, patient=clinic.other_patient, finalize=False)
    pay(make_invoice(branch=clinic.branch, patient=clinic.patient), "100.00")
    assert invoice.status == "finalized"
    return token_for(list(SCOPES), branches=[clinic.branch], rate_limit_per_minute=1_000_000)


def test_schemathesis_finds_no_failure_against_a_live_server(
    live_server: Any, seeded_token: str, tmp_path: Path
) -> None:
    schema_file = tmp_path / "openapi.json"
    schema_file.write_text(json.dumps(_document()))
    command = [
        str(Path(sys.executable).parent / "st"),
        "run",
        str(schema_file),
        "--url",
        live_server.url,
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--checks",
        CHECKS,
        "--max-examples",
        os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "3"),
        "--seed",
        "20261124",
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--continue-on-failure",
        "--header",
        f"Authorization: Bearer {seeded_token}",
        "--report",
        "ndjson",
        "--report-dir",
        str(tmp_path / "report"),
        "--output-truncate",
        "false",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)  # noqa: S603

    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]


def _pinned(document: dict[str, Any], bodies: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The document with some request bodies replaced by an enum of whole, valid bodies (seeded ids, free
    cells), so the stateful phase creates real appointments and invoices and can follow their links."""
    schemas = document["components"]["schemas"]
    for name, choices in bodies.items():
        schemas[name] = {"enum": choices}
    return document


def _report_statuses(report_dir: Path) -> dict[str, set[int]]:
    """operationId (as the report labels it: "METHOD /path") -> the statuses it answered."""
    seen: dict[str, set[int]] = {}
    for path in report_dir.rglob("*.ndjson"):
        for line in path.read_text().splitlines():
            for label, status in _interactions(json.loads(line)):
                seen.setdefault(label, set()).add(status)
    return seen


def _interactions(event: Any) -> Any:
    if isinstance(event, dict):
        request, response = event.get("request"), event.get("response")
        if isinstance(request, dict) and isinstance(response, dict) and "status_code" in response:
            yield f"{request.get('method')} {request.get('uri', '')}", response["status_code"]
        for value in event.values():
            yield from _interactions(value)
    elif isinstance(event, list):
        for value in event:
            yield from _interactions(value)


def test_the_stateful_phase_follows_links_from_real_creates_to_the_operations_they_enable(
    live_server: Any, token_for: Any, settings: Any, tmp_path: Path, client: Any
) -> None:
    from tests.appointments.lifecycle_helpers import DAY, NEXT_DAY

    settings.ANONYMOUS_RATE_LIMIT = 100_000
    clinic = make_clinic(token_for)
    BillableServiceFactory(code="CONS-GEN")
    token = token_for(list(SCOPES), branches=[clinic.branch], rate_limit_per_minute=1_000_000)

    def cells(day: Any) -> list[dict[str, str]]:
        url = f"/api/v1/appointments/slots?doctor_id={clinic.doctor.id}&date={day.isoformat()}"
        response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 200, response.content
        return response.json()

    monday, tuesday = cells(DAY), cells(NEXT_DAY)
    patients = [str(clinic.patient.id), str(clinic.other_patient.id)]
    document = _pinned(
        _document(),
        {
            "BookingRequest": [
                {
                    "patient_id": patients[index % 2],
                    "doctor_id": str(clinic.doctor.id),
                    "branch_id": str(clinic.branch.id),
                    "slot_start": cell["start_time"],
                    "slot_end": cell["end_time"],
                }
                for index, cell in enumerate(monday)
            ],
            "RescheduleRequest": [
                {"new_slot_start": cell["start_time"], "new_slot_end": cell["end_time"], "reason": "moved"}
                for cell in tuesday
            ],
            "InvoiceCreateRequest": [
                {
                    "patient_id": patient,
                    "branch_id": str(clinic.branch.id),
                    "line_items": [{"service_code": "CONS-GEN", "quantity": 1}],
                    "finalize": True,
                }
                for patient in patients
            ],
            "PaymentRequest": [{"amount": 1, "payment_mode": "cash"}],
        },
    )
    schema_file = tmp_path / "openapi.json"
    schema_file.write_text(json.dumps(document))
    command = [
        str(Path(sys.executable).parent / "st"),
        "run",
        str(schema_file),
        "--url",
        live_server.url,
        "--phases",
        "stateful",
        # Only the creates and the writes their links enable: the state machine spends its steps there.
        "--include-operation-id-regex",
        "^(appointments_create|appointments_reschedule|appointments_cancel|billing_invoices_create"
        "|billing_invoices_payments_create)$",
        "--checks",
        CHECKS,
        "--max-examples",
        os.environ.get("SCHEMATHESIS_STATEFUL_MAX_EXAMPLES", "60"),
        "--seed",
        "20261124",
        "--workers",
        "1",
        "--continue-on-failure",
        "--header",
        f"Authorization: Bearer {token}",
        "--report",
        "ndjson",
        "--report-dir",
        str(tmp_path / "report"),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)  # noqa: S603

    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    succeeded = {
        label.split("?")[0].rsplit("/", 1)[-1]
        for label, codes in _report_statuses(tmp_path / "report").items()
        if label.startswith(("POST", "PATCH")) and any(200 <= code < 300 for code in codes)
    }
    # Bookings and invoices were created, and the state machine went on to a successful reschedule and payment.
    assert {"appointments", "invoices", "reschedule", "payments"} <= succeeded, sorted(succeeded)
