"""The specification's search through an independent client (fhirclient, the SMART on FHIR Python client,
with its own R4 models) against a live server: `system|` tokens, `_summary=count`, `_elements`, a Slot
range walked page by page through its next links, and a read revalidated with If-None-Match."""

from __future__ import annotations

from datetime import time, timedelta
from typing import Any

import pytest
from fhirclient.models.observation import Observation
from fhirclient.models.patient import Patient as FhirPatient
from fhirclient.models.slot import Slot
from fhirclient.server import FHIRServer

from appointments.models import WeeklySession
from patients.models import Patient
from tests.appointments.factories import WeeklySessionFactory, future_monday
from tests.emr.world import make_record_world
from tests.integrations.fhir.conftest import ALL_READ
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _server(live_server: Any, token: str) -> FHIRServer:
    server = FHIRServer(None, base_uri=f"{live_server.url}/fhir/R4/")
    server.session.headers["Authorization"] = f"Bearer {token}"
    return server


def test_fhirclient_searches_by_system_alone_counts_and_subsets(live_server: Any, token_for: Any) -> None:
    world = make_record_world(token_for)
    Patient.objects.filter(pk=world.patient.pk).update(national_health_id="91123456789012")
    PatientFactory(registration_branch=world.blr, national_health_id=None)
    server = _server(live_server, token_for(ALL_READ))

    in_loinc = Observation.where({"code": "http://loinc.org|"}).perform_resources(server)
    without_system = Observation.where({"code": "|718-7"}).perform_resources(server)
    with_abha = FhirPatient.where({"identifier": "https://healthid.ndhm.gov.in|"}).perform_resources(server)
    counted = FhirPatient.where({"_summary": "count"}).perform(server)
    cut = FhirPatient.where({"_id": str(world.patient.id), "_elements": "identifier"}).perform_resources(server)

    assert len(in_loinc) == 2
    assert {coding.system for resource in in_loinc for coding in resource.code.coding} == {"http://loinc.org"}
    assert without_system == []
    assert [resource.id for resource in with_abha] == [str(world.patient.id)]
    [abha] = [identifier for identifier in with_abha[0].identifier if identifier.system.endswith("ndhm.gov.in")]
    assert (abha.type.coding[0].system, abha.type.coding[0].code) == (
        "http://terminology.hl7.org/CodeSystem/v2-0203",
        "NI",
    )
    assert counted.total == 2
    assert not counted.entry
    [patient] = cut
    assert (patient.name, patient.identifier[0].value) == (None, world.patient.patient_id)
    assert [(tag.system, tag.code) for tag in patient.meta.tag] == [
        ("http://terminology.hl7.org/CodeSystem/v3-ObservationValue", "SUBSETTED")
    ]


def test_fhirclient_walks_a_fortnight_of_slots_page_by_page(live_server: Any, token_for: Any) -> None:
    world = make_record_world(token_for)
    doctor = world.pharmacy.doctor
    doctor.default_slot_minutes = 30
    doctor.save(update_fields=["default_slot_minutes"])
    for weekday in WeeklySession.Weekday:
        WeeklySessionFactory(doctor=doctor, branch=world.blr, weekday=weekday, start=time(9, 0), end=time(19, 0))
    monday = future_monday()
    server = _server(live_server, token_for(["appointments:read"]))
    search = Slot.where(
        {
            "practitioner": f"Practitioner/{doctor.id}",
            "start": {"$and": [f"ge{monday.isoformat()}", f"le{(monday + timedelta(days=13)).isoformat()}"]},
            "_count": "100",
        }
    )

    pages = list(search.perform_iter(server))

    assert [len(page.entry) for page in pages] == [100, 100, 80]
    assert {page.total for page in pages} == {280}
    starts = [entry.resource.start.date for page in pages for entry in page.entry]
    assert starts == sorted(starts)


def test_a_read_revalidates_with_its_etag(live_server: Any, token_for: Any) -> None:
    world = make_record_world(token_for)
    server = _server(live_server, token_for(ALL_READ))
    url = f"{live_server.url}/fhir/R4/Patient/{world.patient.id}"

    first = server.session.get(url, headers={"Accept": "application/fhir+json"})
    again = server.session.get(url, headers={"If-None-Match": first.headers["ETag"]})
    xml = server.session.get(url, headers={"Accept": "application/fhir+xml"})

    assert (first.status_code, again.status_code, again.content) == (200, 304, b"")
    assert FhirPatient(first.json()).id == str(world.patient.id)
    assert (xml.status_code, xml.json()["resourceType"]) == (406, "OperationOutcome")
