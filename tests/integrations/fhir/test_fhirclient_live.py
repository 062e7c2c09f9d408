"""The server through an independent client: the SMART on FHIR Python client (`fhirclient`, its own R4
models) against a live server: it parses the CapabilityStatement, reads, searches, and follows the
Bundle's next links page by page."""

from __future__ import annotations

from typing import Any

import pytest
from fhirclient.models.bundle import Bundle
from fhirclient.models.encounter import Encounter
from fhirclient.models.observation import Observation
from fhirclient.models.patient import Patient as FhirPatient
from fhirclient.server import FHIRServer, FHIRUnauthorizedException

from tests.emr.world import make_record_world
from tests.integrations.fhir.conftest import ALL_READ
from tests.patients.factories import VisitFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _server(live_server: Any, token: str | None) -> FHIRServer:
    server = FHIRServer(None, base_uri=f"{live_server.url}/fhir/R4/")
    if token:
        server.session.headers["Authorization"] = f"Bearer {token}"
    return server


def test_fhirclient_reads_searches_and_pages_through_a_live_server(live_server: Any, token_for: Any) -> None:
    world = make_record_world(token_for)
    for _ in range(4):
        VisitFactory(patient=world.patient, branch=world.blr, start=world.old_visit.start)
    server = _server(live_server, token_for(ALL_READ, branches=[world.blr]))

    capability = server.capabilityStatement
    patient = FhirPatient.read(str(world.patient.id), server)
    found = FhirPatient.where({"identifier": world.patient.patient_id}).perform_resources(server)
    pages = list(Encounter.where({"patient": str(world.patient.id), "_count": "2"}).perform_iter(server))
    observations = Observation.where({"patient": str(world.patient.id), "code": "http://loinc.org|718-7"}).perform(
        server
    )

    assert (capability.fhirVersion, capability.rest[0].mode) == ("4.0.1", "server")
    assert (patient.name[0].family, patient.gender, patient.identifier[0].value) == (
        "Sharma",
        "female",
        world.patient.patient_id,
    )
    assert [resource.id for resource in found] == [str(world.patient.id)]
    assert [len(page.entry) for page in pages] == [2, 2, 2]
    assert all(isinstance(page, Bundle) and page.total == 6 for page in pages)
    [observation] = [entry.resource for entry in observations.entry]
    assert (observation.valueQuantity.value, observation.valueQuantity.code) == (10.9, "g/dL")
    assert observation.interpretation[0].coding[0].code == "L"


def test_fhirclient_without_a_token_is_refused(live_server: Any, token_for: Any) -> None:
    world = make_record_world(token_for)

    with pytest.raises(FHIRUnauthorizedException):
        FhirPatient.read(str(world.patient.id), _server(live_server, None))
