"""Every resource type the server emits, read through the API and checked here again, independently of the
server's own check, against its R4 (4.0.1) model and the codes of its required bindings; exact bodies for
the mappings the contract spells out (Patient identifiers, names, telecom, address; Observation LOINC,
UCUM, ranges, interpretation)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic.v1 import ValidationError

from appointments.models import Appointment
from integrations.fhir import r4, registry
from integrations.fhir.outcome import issue_code, outcome
from integrations.fhir.registry import RESOURCE_TYPES
from lab.models import LabResult
from patients.models import Patient
from tests.appointments.factories import AppointmentFactory
from tests.emr.world import RecordWorld
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import FHIR_JSON, entries, fhir_get
from tests.patients.factories import aadhaar

pytestmark = pytest.mark.django_db


def test_the_models_are_r4_4_0_1_on_pydantic_v1_and_pydantic_2_is_untouched() -> None:
    import pydantic

    assert r4.FHIR_VERSION == "4.0.1"
    assert pydantic.VERSION.startswith("2.")
    assert r4.model_class("Patient").__module__ == "fhir.resources.patient"


def test_every_issue_code_the_server_can_answer_is_in_the_r4_value_set() -> None:
    for status in (400, 401, 403, 404, 405, 406, 409, 410, 413, 415, 422, 429, 500, 503, 418):
        r4.validate(outcome("x", code=issue_code(status)))


def test_the_check_refuses_a_code_outside_a_required_value_set_and_a_malformed_primitive() -> None:
    with pytest.raises(r4.ValueSetError, match=r"Patient\.gender"):
        r4.validate({"resourceType": "Patient", "gender": "feminine"})
    with pytest.raises(r4.ValueSetError, match=r"Bundle.entry\[0\].resource.status"):
        r4.validate(
            {
                "resourceType": "Bundle",
                "type": "searchset",
                "entry": [{"resource": {"resourceType": "Encounter", "status": "done", "class": {"code": "AMB"}}}],
            }
        )
    with pytest.raises(ValidationError):
        r4.validate({"resourceType": "Patient", "birthDate": "01/02/1990"})


@pytest.mark.parametrize("resource_type", sorted(RESOURCE_TYPES))
def test_every_resource_type_reads_and_searches_as_valid_r4(
    world: RecordWorld, token_for: Any, resource_type: str
) -> None:
    AppointmentFactory(
        patient=world.patient,
        doctor=world.pharmacy.doctor,
        branch=world.blr,
        status=Appointment.Status.CANCELLED,
        cancellation_reason="Travel",
    )
    token = token_for(ALL_READ)

    search = fhir_get(token, resource_type)

    assert search["Content-Type"] == FHIR_JSON
    bundle = search.json()
    r4.validate(bundle)
    found = entries(search)
    assert found, f"the world has no {resource_type}"
    for resource in found:
        read = fhir_get(token, f"{resource_type}/{resource['id']}")
        assert read.status_code == 200, read.content
        assert read.json() == resource
        r4.validate(read.json())
        assert r4.model_class(resource_type).parse_obj(read.json()).resource_type == resource_type


def test_a_patient_maps_identifiers_names_telecom_and_address_never_the_national_id(
    world: RecordWorld, token_for: Any, settings: Any
) -> None:
    settings.FHIR_IDENTIFIER_SYSTEM_BASE = "https://hospital.example.in/fhir/sid"
    patient: Patient = world.patient
    Patient.objects.filter(pk=patient.pk).update(
        national_health_id="91123456789012",
        email="priya@example.in",
        address_line1="12 MG Road",
        address_city="Bengaluru",
        address_pincode="560001",
        national_id_last4="6301",
        national_id_hash="x" * 64,
    )
    patient.refresh_from_db()
    response = fhir_get(token_for(["patients:read"]), f"Patient/{patient.id}")

    assert response.status_code == 200
    assert response.json() == {
        "resourceType": "Patient",
        "id": str(patient.id),
        "meta": {"lastUpdated": patient.updated_at.isoformat()},
        "identifier": [
            {
                "use": "usual",
                "type": {
                    "coding": [
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/v2-0203",
                            "code": "MR",
                            "display": "Medical record number",
                        }
                    ],
                    "text": "Medical record number",
                },
                "system": "https://hospital.example.in/fhir/sid/patient-id",
                "value": patient.patient_id,
            },
            {
                "use": "official",
                "type": {
                    "coding": [
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/v2-0203",
                            "code": "NI",
                            "display": "National unique individual identifier",
                        }
                    ],
                    "text": "ABHA number",
                },
                "system": "https://healthid.ndhm.gov.in",
                "value": "91-1234-5678-9012",
            },
        ],
        "active": True,
        "name": [{"use": "official", "text": "Priya Sharma", "family": "Sharma", "given": ["Priya"]}],
        "telecom": [
            {"system": "phone", "value": patient.phone, "use": "mobile"},
            {"system": "email", "value": "priya@example.in"},
        ],
        "gender": "female",
        "birthDate": patient.date_of_birth.isoformat(),
        "address": [
            {
                "use": "home",
                "line": ["12 MG Road"],
                "city": "Bengaluru",
                "state": "Karnataka",
                "postalCode": "560001",
                "country": "IN",
            }
        ],
        "managingOrganization": {"reference": f"Organization/{world.blr.id}"},
    }
    assert "6301" not in response.content.decode()
    assert aadhaar("52739184630")[-4:] not in response.content.decode()


def test_an_observation_carries_loinc_ucum_range_and_interpretation(world: RecordWorld, token_for: Any) -> None:
    result = LabResult.objects.get(item__order=world.order, analyte__code="HGB")
    item = result.item

    response = fhir_get(token_for(["lab:read"]), f"Observation/{result.id}")

    quantity = {"system": "http://unitsofmeasure.org", "code": "g/dL", "unit": "g/dL"}
    assert response.json() == {
        "resourceType": "Observation",
        "id": str(result.id),
        "meta": {"lastUpdated": result.recorded_at.isoformat()},
        "identifier": [
            {"system": "https://clinic.invalid/fhir/sid/lab-result", "value": f"{item.accession_number}/HGB"}
        ],
        "basedOn": [{"reference": f"ServiceRequest/{item.id}"}],
        "status": "final",
        "category": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                        "code": "laboratory",
                        "display": "Laboratory",
                    }
                ],
                "text": "Laboratory",
            }
        ],
        "code": {
            "coding": [{"system": "http://loinc.org", "code": "718-7", "display": "Hemoglobin"}],
            "text": "Hemoglobin",
        },
        "subject": {"reference": f"Patient/{world.patient.id}"},
        "effectiveDateTime": result.performed_at.astimezone(world.blr.zone).isoformat(),
        "issued": result.recorded_at.isoformat(),
        "performer": [{"display": "Lab tech"}],
        "valueQuantity": {"value": 10.9, **quantity},
        "interpretation": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation",
                        "code": "L",
                        "display": "Low",
                    }
                ]
            }
        ],
        "referenceRange": [{"low": {"value": 12, **quantity}, "high": {"value": 15.5, **quantity}}],
    }


def test_an_imaging_report_is_a_diagnostic_report_conclusion_not_an_observation(
    world: RecordWorld, token_for: Any
) -> None:
    item = world.order.items.get(test=world.xray)
    token = token_for(["lab:read"])

    report = fhir_get(token, f"DiagnosticReport/{item.id}").json()
    observations = fhir_get(token, f"Observation?based-on=ServiceRequest/{item.id}").json()

    assert report["conclusion"] == "No active lung lesion."
    assert report["category"][0]["coding"][0]["code"] == "RAD"
    assert "result" not in report
    assert observations["total"] == 0


def test_a_cancelled_appointment_maps_status_participants_and_reason(world: RecordWorld, token_for: Any) -> None:
    appointment = AppointmentFactory(
        patient=world.patient,
        doctor=world.pharmacy.doctor,
        branch=world.blr,
        status=Appointment.Status.CANCELLED,
        cancellation_reason="Travel",
    )

    body = fhir_get(token_for(["appointments:read"]), f"Appointment/{appointment.id}").json()

    assert (body["status"], body["cancelationReason"]) == ("cancelled", {"text": "Travel"})
    assert body["participant"] == [
        {"actor": {"reference": f"Patient/{world.patient.id}"}, "required": "required", "status": "accepted"},
        {
            "actor": {"reference": f"Practitioner/{world.pharmacy.doctor.id}", "display": "Dr. Anil Rao"},
            "required": "required",
            "status": "accepted",
        },
        {
            "actor": {"reference": f"Location/{world.blr.id}", "display": "Bengaluru Central Clinic"},
            "required": "required",
            "status": "accepted",
        },
    ]
    assert body["start"] == appointment.slot_start.astimezone(world.blr.zone).isoformat()


@pytest.mark.parametrize(
    ("resource_type", "statuses"),
    [
        ("DiagnosticReport", ("amended", "corrected", "entered-in-error")),
        ("Observation", ("amended", "corrected", "entered-in-error")),
        ("Encounter", ("finished", "entered-in-error", "unknown")),
    ],
)
def test_a_status_the_models_list_abridged_is_checked_against_its_full_r4_value_set(resource_type, statuses) -> None:
    # The models list "registered | partial | preliminary | final +": an amended lab result's report is
    # "amended", which the abridged list lacks (found at scale: $everything of a patient with one was a 500).
    required = {"class": {"code": "AMB"}} if resource_type == "Encounter" else {"code": {"text": "CBC"}}
    base = {"resourceType": resource_type, **required}
    for status in statuses:
        assert r4.validate({**base, "status": status})["status"] == status
    with pytest.raises(r4.ValueSetError, match=rf"{resource_type}\.status"):
        r4.validate({**base, "status": "+"})


def test_only_those_statuses_are_listed_abridged_among_the_types_served() -> None:
    abridged = set()
    for resource_type in registry.RESOURCE_TYPES:
        for field in r4.model_class(resource_type).__fields__.values():
            if "+" in (field.field_info.extra.get("enum_values") or []):
                abridged.add((resource_type, field.alias))
    assert abridged == set(r4.ABRIDGED_STATUSES)
