"""`emr:read` is the clinical record, read-only, everywhere: the lab, imaging and medication sections it
reads through /patients/{id}/record are the FHIR Observation, DiagnosticReport, ServiceRequest,
MedicationRequest and MedicationDispense it reads too, beside lab:read and pharmacy:read (which still
read only their own types)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from integrations.clients.models import AuditLogEntry
from tests.emr.world import RecordWorld
from tests.helpers import bearer
from tests.integrations.fhir.helpers import assert_outcome, fhir_get, ids

pytestmark = pytest.mark.django_db
RECORD_TYPES = ["Observation", "DiagnosticReport", "ServiceRequest", "MedicationRequest", "MedicationDispense"]
OWN_SCOPE = {
    "Observation": "lab:read",
    "DiagnosticReport": "lab:read",
    "ServiceRequest": "lab:read",
    "MedicationRequest": "pharmacy:read",
    "MedicationDispense": "pharmacy:read",
}


@pytest.mark.parametrize("name", RECORD_TYPES)
def test_an_emr_read_token_searches_and_reads_the_records_lab_and_medication_types(
    world: RecordWorld, token_for: Any, name: str
) -> None:
    record = token_for(["emr:read"], branches=[world.blr])
    own = token_for([OWN_SCOPE[name]], branches=[world.blr])

    found = fhir_get(record, f"{name}?patient=Patient/{world.patient.id}")
    first = ids(found)[0]
    read = fhir_get(record, f"{name}/{first}")

    assert ids(found) == ids(fhir_get(own, f"{name}?patient=Patient/{world.patient.id}"))
    assert read.status_code == 200
    assert read.json() == fhir_get(own, f"{name}/{first}").json()
    assert AuditLogEntry.objects.get(request_id=read["X-Request-ID"]).patient_ids == [world.patient.id]


def test_the_record_and_fhir_show_an_emr_read_token_the_same_results_and_medications(
    world: RecordWorld, token_for: Any
) -> None:
    token = token_for(["emr:read"], branches=[world.blr])

    record = Client().get(f"/api/v1/patients/{world.patient.id}/record", **bearer(token)).json()
    observations = fhir_get(token, f"Observation?patient=Patient/{world.patient.id}").json()
    requests = fhir_get(token, f"MedicationRequest?patient=Patient/{world.patient.id}").json()
    dispenses = fhir_get(token, f"MedicationDispense?patient=Patient/{world.patient.id}").json()

    analyte_results = [item for item in record["results"]["items"] if item.get("analyte")]
    assert observations["total"] == len(analyte_results) > 0
    prescribed = sum(len(prescription["items"]) for prescription in record["prescriptions"]["items"])
    assert requests["total"] == prescribed > 0
    dispensed = sum(len(dispense["lines"]) for dispense in record["dispenses"]["items"])
    assert dispenses["total"] == dispensed > 0


def test_everything_with_emr_read_holds_the_lab_and_medication_types(world: RecordWorld, token_for: Any) -> None:
    token = token_for(["patients:read", "emr:read"], branches=[world.blr])

    bundle = fhir_get(token, f"Patient/{world.patient.id}/$everything").json()

    kinds = sorted({entry["resource"]["resourceType"] for entry in bundle["entry"]})
    assert kinds == sorted(["Patient", "Encounter", "Condition", "AllergyIntolerance", *RECORD_TYPES])


@pytest.mark.parametrize(
    ("scope", "name", "needed"),
    [
        ("lab:read", "MedicationRequest", "pharmacy:read"),
        ("pharmacy:read", "Observation", "lab:read"),
        ("lab:read", "Condition", "emr:read"),
        ("appointments:read", "DiagnosticReport", "lab:read"),
        ("emr:read", "Patient", "patients:read"),
        ("emr:read", "Appointment", "appointments:read"),
    ],
)
def test_other_scopes_still_read_only_their_own_types(
    world: RecordWorld, token_for: Any, scope: str, name: str, needed: str
) -> None:
    response = fhir_get(token_for([scope]), name)

    assert assert_outcome(response, 403, "forbidden") == f"This operation requires the scope {needed}."
    assert response["WWW-Authenticate"].endswith(f'scope="{needed}"')
    assert AuditLogEntry.objects.get(request_id=response["X-Request-ID"]).patient_ids == []


def test_the_capability_statement_names_every_scope_that_reads_a_type(client: Client) -> None:
    body = client.get("/fhir/R4/metadata").json()
    documentation = {resource["type"]: resource["documentation"] for resource in body["rest"][0]["resource"]}

    for name in RECORD_TYPES:
        assert documentation[name].startswith(f"Scope `{OWN_SCOPE[name]}` or `emr:read`."), name
    assert documentation["Patient"].startswith("Scope `patients:read`."), documentation["Patient"]
