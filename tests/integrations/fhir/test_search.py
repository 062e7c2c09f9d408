"""Search with FHIR semantics (docs/api-rules.md §15): identifiers, names, date prefixes, tokens, paging with
absolute links and a total, _sort, _include; and every refusal as an OperationOutcome naming the parameter."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from appointments.models import Appointment
from integrations.clients.models import AuditLogEntry
from patients.models import Patient
from patients.services import patient_merge
from tests.appointments.factories import AppointmentFactory
from tests.emr.world import RecordWorld, at_ist
from tests.helpers import bearer
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import assert_outcome, entries, fhir_get, ids
from tests.patients.factories import PatientFactory, VisitFactory

pytestmark = pytest.mark.django_db
ABHA = "https://healthid.ndhm.gov.in"


def _patients(token: str, query: str) -> list[str]:
    return ids(fhir_get(token, f"Patient?{query}"))


def test_patient_by_abha_with_its_system_by_patient_id_with_ours_and_by_either_without(
    world: RecordWorld, token_for: Any
) -> None:
    Patient.objects.filter(pk=world.patient.pk).update(national_health_id="91123456789012")
    other = PatientFactory(registration_branch=world.blr, national_health_id="91000000000001")
    token = token_for(["patients:read"])
    mine = [str(world.patient.id)]

    assert _patients(token, f"identifier={ABHA}|91-1234-5678-9012") == mine
    assert _patients(token, f"identifier={ABHA}|91123456789012") == mine
    assert (
        _patients(token, f"identifier=https://clinic.invalid/fhir/sid/patient-id|{world.patient.patient_id.lower()}")
        == mine
    )
    assert _patients(token, f"identifier={world.patient.patient_id}") == mine
    assert _patients(token, f"identifier={other.patient_id},{world.patient.patient_id}") == sorted(
        [str(other.id), str(world.patient.id)], key=lambda key: [str(other.id), str(world.patient.id)].index(key)
    )
    # Our patient_id under ABDM's system, an unknown system, a value that is no ABHA number: nobody.
    assert _patients(token, f"identifier={ABHA}|{world.patient.patient_id}") == []
    assert _patients(token, "identifier=http://example.org/other|91123456789012") == []
    assert _patients(token, f"identifier={ABHA}|123") == []


def test_patient_by_name_prefix_birthdate_gender_and_phone_tail(world: RecordWorld, token_for: Any) -> None:
    born = world.patient.date_of_birth
    token = token_for(["patients:read"])
    mine = [str(world.patient.id)]

    assert _patients(token, "name=pri") == mine
    assert _patients(token, "name=SHAR") == mine
    assert _patients(token, "name=riya") == []
    assert _patients(token, "name=Priya%20SH") == mine  # several words: from a word start, in order
    assert _patients(token, "name=priya%20%20sharma") == mine
    assert _patients(token, "name=sharma%20priya") == []
    assert _patients(token, "name=p%25") == []  # LIKE's wildcards are literal characters
    assert _patients(token, "name=_riya") == []
    assert _patients(token, "name=pri,nobody") == mine
    assert _patients(token, "name:contains=riya") == mine
    assert _patients(token, "name:exact=Sharma") == mine
    assert _patients(token, f"birthdate={born.isoformat()}") == mine
    assert _patients(token, f"birthdate=gt{born.isoformat()}") == []
    assert _patients(token, f"birthdate=ge{born.isoformat()}") == mine
    assert _patients(token, f"birthdate={born.year}") == mine
    assert _patients(token, f"birthdate=ne{born.year}") == []
    assert _patients(token, "gender=male") == []
    assert _patients(token, "gender=http://hl7.org/fhir/administrative-gender|female") == mine
    assert _patients(token, f"phone={world.patient.phone[-6:]}") == mine


def test_date_prefixes_on_encounters(world: RecordWorld, token_for: Any) -> None:
    token = token_for(["emr:read"], branches=[world.blr])
    day = world.visit.start.astimezone(world.blr.zone).date()
    recent, old = str(world.visit.id), str(world.old_visit.id)

    def found(value: str) -> set[str]:
        return set(ids(fhir_get(token, f"Encounter?patient=Patient/{world.patient.id}&date={value}")))

    assert found(day.isoformat()) == {recent}
    assert found(f"eq{day.isoformat()}") == {recent}
    assert found(f"ne{day.isoformat()}") == {old}
    assert found(f"lt{day.isoformat()}") == {old}
    assert found(f"eb{day.isoformat()}") == {old}
    assert found(f"le{day.isoformat()}") == {recent, old}
    assert found(f"gt{day.isoformat()}") == set()
    assert found(f"sa{(day - timedelta(days=1)).isoformat()}") == {recent}
    assert found(f"ge{day.isoformat()}") == {recent}
    assert found(f"ap{day.isoformat()}") == {recent}
    # A time needs its offset; the instant 10:30 IST is 05:00Z.
    assert found(f"{day.isoformat()}T10:30:00%2B05:30") == {recent}
    assert found(f"ge{day.isoformat()}T05:00Z") == {recent}
    assert found(f"gt{day.isoformat()}T05:00Z") == set()
    # Two values of one parameter: AND (a range); a comma: OR.
    assert found(f"ge{(day - timedelta(days=3)).isoformat()}&date=le{day.isoformat()}") == {recent}
    assert found(f"{day.isoformat()},{world.old_visit.start.astimezone(world.blr.zone).date().isoformat()}") == {
        recent,
        old,
    }


@pytest.mark.parametrize(
    ("query", "expression"),
    [
        ("date=2026-13-01", ["date"]),
        ("date=xx2026-01-01", ["date"]),
        ("date=2026-01-01T10:00", ["date"]),
        ("date=2026-02-30", ["date"]),
        ("date=\u0662\u0660\u0662\u0666", ["date"]),  # non-ASCII digits: refused before the view (docs/api-rules.md §7)
        ("date=", ["date"]),
        ("_count=-1", ["_count"]),
        ("_count=ten", ["_count"]),
        ("_offset=1000000001", ["_offset"]),
        ("_sort=-name", ["_sort"]),
    ],
)
def test_malformed_values_are_400_naming_the_parameter(
    world: RecordWorld, token_for: Any, query: str, expression: list[str] | None
) -> None:
    response = fhir_get(token_for(["emr:read"]), f"Encounter?{query}")

    assert_outcome(response, 400, "invalid", expression)


def test_unknown_parameters_are_400_unless_lenient_then_reported_in_the_bundle(
    world: RecordWorld, token_for: Any
) -> None:
    token = token_for(["emr:read"])

    strict = fhir_get(token, "Encounter?serach=x&_contained=true")
    lenient = fhir_get(token, "Encounter?serach=x", HTTP_PREFER="handling=lenient")
    include = fhir_get(token, "Encounter?_include=Encounter:patient")

    assert "serach, _contained" in assert_outcome(strict, 400, "not-supported", ["serach", "_contained"])
    assert lenient.status_code == 200
    assert len(entries(lenient)) == 3
    [warning] = entries(lenient, "outcome")
    assert warning["issue"][0]["severity"] == "warning"
    assert "serach" in warning["issue"][0]["diagnostics"]
    assert_outcome(include, 400, "not-supported", ["_include"])


def test_paging_has_a_total_and_absolute_links_that_walk_every_row_once(world: RecordWorld, token_for: Any) -> None:
    for days in range(5):
        VisitFactory(patient=world.patient, branch=world.blr, start=at_ist(date(2020, 1, 1) + timedelta(days=days), 9))
    token = token_for(["emr:read"], branches=[world.blr])
    url = "Encounter?_count=3&_sort=-date"
    seen: list[str] = []
    while url:
        response = fhir_get(token, url)
        bundle = response.json()
        assert bundle["total"] == 7
        seen += ids(response)
        links = {link["relation"]: link["url"] for link in bundle["link"]}
        assert links["self"].startswith("http://testserver/fhir/R4/Encounter?")
        url = links.get("next", "").removeprefix("http://testserver/fhir/R4/")
    assert len(seen) == len(set(seen)) == 7
    assert seen[:2] == [str(world.visit.id), str(world.old_visit.id)]
    ascending = ids(fhir_get(token, "Encounter?_count=100&_sort=date"))
    assert ascending == list(reversed(seen))
    counted = fhir_get(token, "Encounter?_count=0").json()
    assert (counted["total"], counted["entry"]) == (7, [])


def test_appointment_include_patient_and_status_tokens(world: RecordWorld, token_for: Any) -> None:
    booked = AppointmentFactory(patient=world.patient, doctor=world.pharmacy.doctor, branch=world.blr)
    AppointmentFactory(
        patient=world.patient,
        doctor=world.pharmacy.doctor,
        branch=world.blr,
        status=Appointment.Status.CANCELLED,
        slot_start=booked.slot_start + timedelta(days=1),
        slot_end=booked.slot_end + timedelta(days=1),
    )
    token = token_for(["appointments:read", "patients:read"])
    no_patients = token_for(["appointments:read"])

    response = fhir_get(token, "Appointment?status=booked&_include=Appointment:patient")

    assert ids(response) == [str(booked.id)]
    assert ids(response, "include") == [str(world.patient.id)]
    assert AuditLogEntry.objects.get(request_id=response["X-Request-ID"]).patient_ids == [world.patient.id]
    assert ids(fhir_get(token, "Appointment?status=fulfilled")) == []
    assert_outcome(fhir_get(no_patients, "Appointment?_include=Appointment:patient"), 403, "forbidden")


def test_a_restricted_client_finds_nothing_of_another_branch(world: RecordWorld, token_for: Any) -> None:
    stranger = PatientFactory(registration_branch=world.mum)
    mum_only = token_for(ALL_READ, branches=[world.mum])
    blr_only = token_for(ALL_READ, branches=[world.blr])

    assert ids(fhir_get(mum_only, "Patient")) == [str(stranger.id)]
    assert ids(fhir_get(mum_only, f"Encounter?patient={world.patient.id}")) == []
    assert ids(fhir_get(blr_only, "Observation")) == [
        str(result["id"]) for result in entries(fhir_get(blr_only, f"Observation?patient={world.patient.id}"))
    ]
    assert len(ids(fhir_get(blr_only, "Observation"))) == 1  # the MUM order's result is not shown
    assert_outcome(fhir_get(mum_only, f"Patient/{world.patient.id}"), 404, "not-found")
    assert_outcome(fhir_get(mum_only, f"Patient/{world.patient.id}/$everything"), 404, "not-found")
    assert_outcome(fhir_get(blr_only, f"Encounter/{world.mum_visit.id}"), 404, "not-found")
    assert_outcome(fhir_get(blr_only, f"Observation/{world.mum_order.items.get().results.get().id}"), 404, "not-found")


def test_tokens_scopes_and_unknown_ids(world: RecordWorld, token_for: Any) -> None:
    missing = fhir_get(None, "Patient")
    wrong = fhir_get(token_for(["lab:read"]), "Patient")
    bad = fhir_get("not-a-token", "Patient")

    assert_outcome(missing, 401, "security")
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert_outcome(bad, 401, "security")
    assert_outcome(wrong, 403, "forbidden")
    assert 'scope="patients:read"' in wrong["WWW-Authenticate"]
    token = token_for(["patients:read"])
    for key in ("00000000-0000-0000-0000-000000000000", "PAT-000001", "x" * 300):
        assert_outcome(fhir_get(token, f"Patient/{key}"), 404, "not-found")
    assert_outcome(fhir_get(token, "Patient/abc%00def"), 400, "invalid", ["path"])


def test_unknown_paths_are_404_and_unsupported_methods_405_with_allow(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    assert_outcome(fhir_get(token, "Nope"), 404, "not-found")
    assert_outcome(Client().post("/fhir/R4/Nope", {}, **bearer(token)), 404, "not-found")
    assert_outcome(Client().get("/fhir/R5/Patient"), 404, "not-found")
    created = Client().post("/fhir/R4/Patient", {}, content_type="application/fhir+json", **bearer(token))
    assert_outcome(created, 405, "not-supported")
    assert created["Allow"] == "GET, HEAD"
    assert Patient.objects.count() == 1


def test_metadata_needs_no_token_and_points_at_the_openapi_document() -> None:
    response = fhir_get(None, "metadata")

    assert response.status_code == 200
    body = response.json()
    assert (body["resourceType"], body["fhirVersion"], body["kind"]) == ("CapabilityStatement", "4.0.1", "instance")
    assert "http://testserver/api/v1/schema" in body["rest"][0]["documentation"]
    patient = next(resource for resource in body["rest"][0]["resource"] if resource["type"] == "Patient")
    assert {param["name"] for param in patient["searchParam"]} >= {"_id", "identifier", "name", "birthdate", "phone"}
    assert [operation["name"] for operation in patient["operation"]] == ["everything", "export"]


def test_searches_and_reads_are_audited_with_the_patients_shown(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    search = fhir_get(token, f"Observation?patient={world.patient.id}")
    read = fhir_get(token, f"Patient/{world.patient.id}")

    for response, route in ((search, "fhir/R4/Observation"), (read, "fhir/R4/Patient/<str:id>")):
        row = AuditLogEntry.objects.get(request_id=response["X-Request-ID"])
        assert (row.status, row.route, row.patient_ids) == (200, route, [world.patient.id])


def test_everything_returns_the_compartment_the_scopes_cover(world: RecordWorld, token_for: Any) -> None:
    full = fhir_get(token_for(ALL_READ, branches=[world.blr]), f"Patient/{world.patient.id}/$everything").json()
    narrow = fhir_get(token_for(["patients:read", "emr:read"]), f"Patient/{world.patient.id}/$everything").json()
    typed = fhir_get(token_for(ALL_READ), f"Patient/{world.patient.id}/$everything?_type=Patient,Condition").json()

    def kinds(bundle: dict[str, Any]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in bundle["entry"]:
            counts[entry["resource"]["resourceType"]] = counts.get(entry["resource"]["resourceType"], 0) + 1
        return counts

    assert kinds(full) == {
        "Patient": 1,
        "Encounter": 2,
        "Condition": 2,
        "AllergyIntolerance": 1,
        "MedicationRequest": 1,
        "MedicationDispense": 1,
        "ServiceRequest": 2,
        "Observation": 1,
        "DiagnosticReport": 2,
    }
    assert full["total"] == 13
    # emr:read is the whole clinical record, its lab and medication sections included (docs/fhir.md section 1).
    assert kinds(narrow) == {
        "Patient": 1,
        "Encounter": 3,
        "Condition": 2,
        "AllergyIntolerance": 1,
        "MedicationRequest": 1,
        "MedicationDispense": 1,
        "ServiceRequest": 3,
        "Observation": 2,
        "DiagnosticReport": 3,
    }
    assert kinds(typed) == {"Patient": 1, "Condition": 2}


def test_everything_pages_through_the_whole_record_in_order(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ, branches=[world.blr])
    whole = fhir_get(token, f"Patient/{world.patient.id}/$everything").json()
    everything = [entry["resource"]["id"] for entry in whole["entry"]]
    assert whole["total"] == len(everything) == 13
    assert [link["relation"] for link in whole["link"]] == ["self", "first"]

    seen: list[str] = []
    url = f"Patient/{world.patient.id}/$everything?_count=5"
    while url:
        page = fhir_get(token, url).json()
        assert page["total"] == 13
        assert len(page["entry"]) <= 5
        seen += [entry["resource"]["id"] for entry in page["entry"]]
        following = [link["url"] for link in page["link"] if link["relation"] == "next"]
        url = following[0].split("/fhir/R4/", 1)[1] if following else ""
    assert seen == everything  # 5 + 5 + 3, across the types' boundaries, nothing twice or left out

    beyond = fhir_get(token, f"Patient/{world.patient.id}/$everything?_offset=13").json()
    assert (beyond["total"], beyond.get("entry", [])) == (13, [])
    typed = fhir_get(token, f"Patient/{world.patient.id}/$everything?_type=Condition&_count=1&_offset=1").json()
    assert [entry["resource"]["resourceType"] for entry in typed["entry"]] == ["Condition"]
    assert "_type=Condition" in typed["link"][0]["url"]


@pytest.mark.parametrize("query", ["_count=-1", "_count=ten", "_offset=-1", "_count=%D9%A3", "start=ge2026-01-01"])
def test_everything_refuses_a_bad_page_naming_the_parameter(world: RecordWorld, token_for: Any, query: str) -> None:
    response = fhir_get(token_for(ALL_READ), f"Patient/{world.patient.id}/$everything?{query}")

    assert_outcome(response, 400, "invalid", [query.split("=")[0]])


def test_everything_includes_the_records_merged_into_the_patient(world: RecordWorld, token_for: Any) -> None:
    duplicate = PatientFactory(registration_branch=world.blr)
    visit = VisitFactory(patient=duplicate, branch=world.blr, start=at_ist(date(2022, 5, 1), 10))
    patient_merge(source=duplicate, target=world.patient, by="test", reason="duplicate registration")
    elsewhere = PatientFactory(registration_branch=world.mum)
    patient_merge(source=elsewhere, target=world.patient, by="test", reason="duplicate registration")

    response = fhir_get(token_for(ALL_READ, branches=[world.blr]), f"Patient/{world.patient.id}/$everything")

    found = entries(response)
    patients = [resource for resource in found if resource["resourceType"] == "Patient"]
    assert [resource["id"] for resource in patients] == [str(world.patient.id), str(duplicate.id)]  # not Mumbai's
    assert patients[1]["link"] == [{"other": {"reference": f"Patient/{world.patient.id}"}, "type": "replaced-by"}]
    assert str(visit.id) in [resource["id"] for resource in found]
    audited = AuditLogEntry.objects.get(request_id=response["X-Request-ID"]).patient_ids
    assert sorted(audited) == sorted([world.patient.id, duplicate.id])


def test_search_and_everything_take_a_fixed_number_of_queries(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)
    searches = [
        f"Encounter?patient={world.patient.id}&_count=100",
        "DiagnosticReport",
        f"Patient/{world.patient.id}/$everything",
    ]
    fhir_get(token, "metadata")

    def counts() -> list[int]:
        found = []
        for path in searches:
            with CaptureQueriesContext(connection) as queries:
                assert fhir_get(token, path).status_code == 200
            found.append(len(queries.captured_queries))
        return found

    before = counts()
    for days in range(30):
        VisitFactory(patient=world.patient, branch=world.blr, start=at_ist(date(2021, 1, 1) + timedelta(days=days), 9))

    assert counts() == before
