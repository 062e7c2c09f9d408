"""Search as the FHIR specification has it (docs/fhir.md §4): token `system|`, `|code`;
`_summary`, `_elements`, `_total`, `_lastUpdated`; `_count` capped; ETag and If-None-Match on reads; JSON
only, XML asked for is 406. Every resource the server emits is checked against the R4 models of
fhir.resources by the server itself under the tests (conftest); subsetted ones are checked here again."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from django.utils import timezone

from integrations.clients.models import AuditLogEntry
from integrations.fhir import r4
from lab.models import LabResult
from patients.models import Diagnosis, Patient
from tests.emr.world import RecordWorld
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import FHIR_JSON, assert_outcome, entries, fhir_get, ids
from tests.patients.factories import DiagnosisFactory, PatientFactory

pytestmark = pytest.mark.django_db
ABHA = "https://healthid.ndhm.gov.in"
LOINC = "http://loinc.org"
OURS = "https://clinic.invalid/fhir/sid"
SUBSETTED = {
    "system": "http://terminology.hl7.org/CodeSystem/v3-ObservationValue",
    "code": "SUBSETTED",
    "display": "Resource content has been reduced",
}


def _links(response: Any) -> dict[str, str]:
    return {link["relation"]: link["url"] for link in response.json()["link"]}


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


# --- Tokens ----------------------------------------------------------------------------------------------------


def test_a_system_alone_finds_every_row_coded_in_it_and_a_bare_bar_only_codes_without_one(
    world: RecordWorld, token_for: Any
) -> None:
    token = token_for(ALL_READ)
    every = sorted(str(key) for key in LabResult.objects.filter(analyte__isnull=False).values_list("id", flat=True))
    assert len(every) == 2

    in_loinc = fhir_get(token, f"Observation?code={quote(LOINC)}|")

    assert sorted(ids(in_loinc)) == every
    assert {coding["system"] for resource in entries(in_loinc) for coding in resource["code"]["coding"]} == {LOINC}
    assert sorted(ids(fhir_get(token, f"Observation?code={LOINC}|718-7"))) == every
    assert sorted(ids(fhir_get(token, "Observation?code=718-7"))) == every
    # Every code we emit has its system: `|718-7` asks for one without, which no Observation has.
    assert ids(fhir_get(token, "Observation?code=|718-7")) == []
    assert ids(fhir_get(token, "Observation?code=http://snomed.info/sct|")) == []
    assert sorted(ids(fhir_get(token, "Observation?status=http://hl7.org/fhir/observation-status|"))) == every
    assert ids(fhir_get(token, "Observation?status=|final")) == []
    assert len(ids(fhir_get(token, f"ServiceRequest?code={LOINC}|"))) == 3
    assert ids(fhir_get(token, "ServiceRequest?code=|58410-2")) == []
    assert len(ids(fhir_get(token, "ServiceRequest?status=http://hl7.org/fhir/request-status|"))) == 3
    assert len(ids(fhir_get(token, f"MedicationRequest?code={OURS}/drug|"))) == 1
    assert ids(fhir_get(token, "MedicationRequest?code=|PARA500")) == []
    assert len(ids(fhir_get(token, "Encounter?class=http://terminology.hl7.org/CodeSystem/v3-ActCode|"))) == 3
    assert ids(fhir_get(token, "Encounter?class=|AMB")) == []
    assert ids(fhir_get(token, "Patient?gender=http://hl7.org/fhir/administrative-gender|")) == [str(world.patient.id)]
    assert len(ids(fhir_get(token, f"Organization?identifier={OURS}/branch|"))) == 2
    assert ids(fhir_get(token, "Organization?identifier=|BLR")) == []
    assert_outcome(fhir_get(token, "Observation?code=|"), 400, "invalid", ["code"])


def test_identifier_by_system_alone_and_without_a_system(world: RecordWorld, token_for: Any) -> None:
    Patient.objects.filter(pk=world.patient.pk).update(national_health_id="91123456789012")
    with_abha = PatientFactory(registration_branch=world.blr, national_health_id="91000000000001")
    without = PatientFactory(registration_branch=world.blr, national_health_id=None)
    token = token_for(["patients:read"])

    assert sorted(ids(fhir_get(token, f"Patient?identifier={ABHA}|"))) == sorted(
        [str(world.patient.id), str(with_abha.id)]
    )
    assert sorted(ids(fhir_get(token, f"Patient?identifier={OURS}/patient-id|"))) == sorted(
        str(key) for key in (world.patient.id, with_abha.id, without.id)
    )
    assert ids(fhir_get(token, f"Patient?identifier=|{without.patient_id}")) == []
    assert ids(fhir_get(token, "Patient?identifier=http://example.org/other|")) == []
    assert ids(fhir_get(token, f"Patient?identifier={without.patient_id}")) == [str(without.id)]


def test_condition_codes_under_the_system_the_mapping_emits(world: RecordWorld, token_for: Any) -> None:
    snomed_row = DiagnosisFactory(patient=world.patient, code="44054006", description="Diabetes", system="SNOMED")
    token = token_for(["emr:read"])
    icd = sorted(str(key) for key in (world.diagnosis.id, world.past_diagnosis.id))

    assert sorted(ids(fhir_get(token, "Condition?code=http://hl7.org/fhir/sid/icd-10|"))) == icd
    assert ids(fhir_get(token, "Condition?code=http://hl7.org/fhir/sid/icd-10|E11.9")) == [str(world.diagnosis.id)]
    assert ids(fhir_get(token, f"Condition?code={OURS}/code/SNOMED|")) == [str(snomed_row.id)]
    assert ids(fhir_get(token, f"Condition?code={OURS}/code/SNOMED|E11.9")) == []
    assert ids(fhir_get(token, "Condition?code=44054006")) == [str(snomed_row.id)]
    assert ids(fhir_get(token, "Condition?code=|E11.9")) == []
    [emitted] = entries(fhir_get(token, f"Condition?_id={snomed_row.id}"))
    assert emitted["code"]["coding"][0]["system"] == f"{OURS}/code/SNOMED"
    assert Diagnosis.objects.count() == 3


# --- _summary, _elements, _total, _count --------------------------------------------------------------------------


def test_summary_count_and_count_zero_answer_the_total_only(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    for query in ("_summary=count", "_count=0", "_count=0&_summary=true"):
        response = fhir_get(token, f"Encounter?{query}")
        body = response.json()
        assert response.status_code == 200
        assert (body["total"], body["entry"]) == (3, [])
        assert "next" not in _links(response)
        row = AuditLogEntry.objects.get(request_id=response["X-Request-ID"])
        assert row.patient_ids in ([], None)  # nothing about any patient was shown


def test_summary_true_keeps_the_summary_elements_and_tags_the_resource(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    [summary] = entries(fhir_get(token, f"Observation?_summary=true&code={LOINC}|718-7&_count=1"))
    [full] = entries(fhir_get(token, f"Observation?code={LOINC}|718-7&_count=1"))

    assert set(full) - set(summary) == {"category", "interpretation", "referenceRange"}
    assert summary["meta"]["tag"] == [SUBSETTED]
    assert "tag" not in full["meta"]
    assert {key: value for key, value in summary.items() if key != "meta"} == {
        key: value for key, value in full.items() if key in summary and key != "meta"
    }
    r4.validate(summary)
    [patient] = entries(fhir_get(token, f"Patient?_id={world.patient.id}&_summary=true"))
    assert set(patient) == {"resourceType", "id", "meta", "identifier", "active", "name", "telecom", "gender"} | {
        "birthDate",
        "address",
        "managingOrganization",
    }
    assert entries(fhir_get(token, f"Patient?_id={world.patient.id}&_summary=data")) == entries(
        fhir_get(token, f"Patient?_id={world.patient.id}")
    )  # no narrative to leave out: nothing is cut, nothing tagged


def test_elements_keeps_those_named_and_what_r4_requires(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    patients = entries(fhir_get(token, f"Patient?_id={world.patient.id}&_elements=identifier,birthDate"))
    observations = entries(fhir_get(token, "Observation?_elements=value[x]&_count=1"))
    by_stem = entries(fhir_get(token, "Observation?_elements=value,subject&_count=1"))

    assert [set(resource) for resource in patients] == [{"resourceType", "id", "meta", "identifier", "birthDate"}]
    assert patients[0]["meta"]["tag"] == [SUBSETTED]
    # status and code are required (1..1) in R4: kept, so the subset is still a valid Observation.
    assert [set(resource) for resource in observations] == [
        {"resourceType", "id", "meta", "status", "code", "valueQuantity"}
    ]
    assert [set(resource) for resource in by_stem] == [
        {"resourceType", "id", "meta", "status", "code", "valueQuantity", "subject"}
    ]
    for resource in [*patients, *observations, *by_stem]:
        r4.validate(resource)
    assert (
        "_elements=identifier%2CbirthDate" in _links(fhir_get(token, "Patient?_elements=identifier,birthDate"))["self"]
    )
    assert_outcome(fhir_get(token, "Patient?_elements=identifier,nope"), 400, "invalid", ["_elements"])
    assert_outcome(fhir_get(token, "Patient?_elements=,"), 400, "invalid", ["_elements"])


def test_summary_text_is_refused_and_unknown_modes_are_400(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    assert "narrative" in assert_outcome(fhir_get(token, "Patient?_summary=text"), 400, "not-supported", ["_summary"])
    assert_outcome(fhir_get(token, "Patient?_summary=yes"), 400, "invalid", ["_summary"])
    assert_outcome(fhir_get(token, "Patient?_total=some"), 400, "invalid", ["_total"])


def test_total_none_leaves_it_out_and_still_links_the_next_page(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    none = fhir_get(token, "Encounter?_total=none&_count=2")
    last = fhir_get(token, "Encounter?_total=none&_count=2&_offset=2")
    accurate = fhir_get(token, "Encounter?_total=accurate&_count=2").json()
    estimate = fhir_get(token, "Encounter?_total=estimate&_count=2").json()

    assert "total" not in none.json()
    assert len(ids(none)) == 2
    assert _query(_links(none)["next"])["_offset"] == ["2"]
    assert _query(_links(none)["next"])["_total"] == ["none"]
    assert len(ids(last)) == 1
    assert "next" not in _links(last)
    assert (accurate["total"], estimate["total"]) == (3, 3)


def test_a_count_above_the_maximum_is_capped_and_the_self_link_says_so(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    for asked in ("101", "5000", "99999999999999999999"):
        response = fhir_get(token, f"Encounter?_count={asked}")
        assert response.status_code == 200
        assert len(ids(response)) == 3
        assert _query(_links(response)["self"])["_count"] == ["100"]


# --- _lastUpdated --------------------------------------------------------------------------------------------------


def test_last_updated_with_prefixes_and_as_a_range(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)
    today = timezone.localdate()
    long_ago = timezone.now() - timedelta(days=40)
    Patient.objects.filter(pk=world.patient.pk).update(updated_at=long_ago)
    fresh = PatientFactory(registration_branch=world.blr)
    old_day = timezone.localtime(long_ago).date()

    def found(query: str) -> list[str]:
        return sorted(ids(fhir_get(token, f"Patient?{query}")))

    assert found(f"_lastUpdated={today.isoformat()}") == [str(fresh.id)]
    assert found(f"_lastUpdated=eq{old_day.isoformat()}") == [str(world.patient.id)]
    assert found(f"_lastUpdated=ge{today.isoformat()}") == [str(fresh.id)]
    assert found(f"_lastUpdated=gt{old_day.isoformat()}") == [str(fresh.id)]
    assert found(f"_lastUpdated=lt{today.isoformat()}") == [str(world.patient.id)]
    assert found(f"_lastUpdated=le{old_day.isoformat()}") == [str(world.patient.id)]
    assert found(f"_lastUpdated=ne{today.isoformat()}") == [str(world.patient.id)]
    between = f"_lastUpdated=ge{(old_day - timedelta(days=1)).isoformat()}&_lastUpdated=le{old_day.isoformat()}"
    assert found(between) == [str(world.patient.id)]
    assert found(f"_lastUpdated=gt{(today + timedelta(days=1)).isoformat()}") == []
    assert len(ids(fhir_get(token, f"Observation?_lastUpdated=ge{today.isoformat()}"))) == 2
    assert ids(fhir_get(token, f"Observation?_lastUpdated=lt{today.isoformat()}")) == []
    ascending = ids(fhir_get(token, "Patient?_sort=_lastUpdated"))
    assert ascending[0] == str(world.patient.id)


# --- Refusals name the parameter, never a 500 -------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "_lastUpdated=garbage",
        "_lastUpdated=ge2026-13-01",
        "_lastUpdated=\u0662\u0660\u0662\u0666",
        "_lastUpdated=2026-01-01T10:00",
        "_lastUpdated=%00",
        "_count=-1",
        "_count=%00",
        "_count=\u0663",
        "_count=1e3",
        "_offset=99999999999999999999",
        "_summary=%00",
        "_elements=%00",
        "_total=%00",
        "_sort=_lastUpdated,nope",
    ],
)
def test_bad_result_parameters_are_400_naming_them(world: RecordWorld, token_for: Any, query: str) -> None:
    name = query.split("=")[0]
    before = fhir_get(token_for(ALL_READ), "Patient").json()["total"]

    response = fhir_get(token_for(ALL_READ), f"Patient?{query}")

    assert_outcome(response, 400, "invalid", [name])
    assert fhir_get(token_for(ALL_READ), "Patient").json()["total"] == before


# --- Reads: ETag, If-None-Match, _elements; JSON only ---------------------------------------------------------------


def test_a_read_has_an_etag_and_if_none_match_with_it_is_304(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)
    path = f"Patient/{world.patient.id}"

    first = fhir_get(token, path)
    tag = first["ETag"]
    again = fhir_get(token, path, HTTP_IF_NONE_MATCH=tag)
    strong = fhir_get(token, path, HTTP_IF_NONE_MATCH=tag.removeprefix("W/"))
    listed = fhir_get(token, path, HTTP_IF_NONE_MATCH=f'W/"other", {tag}')
    star = fhir_get(token, path, HTTP_IF_NONE_MATCH="*")
    other = fhir_get(token, path, HTTP_IF_NONE_MATCH='W/"other"')

    assert first.status_code == 200
    assert re.fullmatch(r'W/"[0-9a-f]{32}"', tag)
    for response in (again, strong, listed, star):
        assert (response.status_code, response.content, response["ETag"]) == (304, b"", tag)
    assert (other.status_code, other["ETag"], other.json()) == (200, tag, first.json())
    audited = AuditLogEntry.objects.get(request_id=again["X-Request-ID"])
    assert audited.patient_ids == [world.patient.id]

    Patient.objects.filter(pk=world.patient.pk).update(first_name="Priyanka", updated_at=timezone.now())
    changed = fhir_get(token, path, HTTP_IF_NONE_MATCH=tag)
    assert changed.status_code == 200
    assert changed["ETag"] != tag
    assert changed.json()["name"][0]["given"] == ["Priyanka"]


def test_reads_take_elements_and_summary_and_slots_too(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)

    cut = fhir_get(token, f"Patient/{world.patient.id}?_elements=name")
    summary = fhir_get(token, f"Observation/{world.order.items.get(test=world.cbc).results.get().id}?_summary=true")

    assert set(cut.json()) == {"resourceType", "id", "meta", "name"}
    assert cut.json()["meta"]["tag"] == [SUBSETTED]
    assert cut["ETag"] != fhir_get(token, f"Patient/{world.patient.id}")["ETag"]
    assert "referenceRange" not in summary.json()
    assert_outcome(fhir_get(token, f"Patient/{world.patient.id}?_summary=count"), 400, "invalid", ["_summary"])
    assert_outcome(fhir_get(token, f"Patient/{world.patient.id}?_count=1"), 400, "not-supported", ["_count"])


@pytest.mark.parametrize(
    ("headers", "path"),
    [
        ({"HTTP_ACCEPT": "application/fhir+xml"}, "Patient"),
        ({"HTTP_ACCEPT": "application/xml"}, "Patient/{id}"),
        ({"HTTP_ACCEPT": "application/fhir+xml;q=1, application/fhir+json;q=0"}, "Patient"),
        ({"HTTP_ACCEPT": "text/html"}, "metadata"),
        ({}, "Patient?_format=xml"),
        ({}, "Patient/{id}?_format=application/fhir%2Bxml"),
    ],
)
def test_xml_is_406_with_an_outcome_in_json(world: RecordWorld, token_for: Any, headers: Any, path: str) -> None:
    response = fhir_get(token_for(ALL_READ), path.format(id=world.patient.id), **headers)

    assert_outcome(response, 406, "not-supported", ["_format"] if "_format" in path else None)
    assert response["Content-Type"] == FHIR_JSON


@pytest.mark.parametrize(
    ("headers", "path"),
    [
        ({"HTTP_ACCEPT": "application/fhir+json"}, "Patient"),
        ({"HTTP_ACCEPT": "application/json"}, "Patient/{id}"),
        ({"HTTP_ACCEPT": "application/json+fhir"}, "Patient"),
        ({"HTTP_ACCEPT": "*/*"}, "Patient"),
        ({"HTTP_ACCEPT": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, "metadata"),
        ({"HTTP_ACCEPT": "application/fhir+xml, application/fhir+json;q=0.5"}, "Patient"),
        ({}, "Patient?_format=json"),
        ({}, "Patient/{id}?_format=application/fhir%2Bjson"),
    ],
)
def test_json_in_any_spelling_is_served(world: RecordWorld, token_for: Any, headers: Any, path: str) -> None:
    response = fhir_get(token_for(ALL_READ), path.format(id=world.patient.id), **headers)

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == FHIR_JSON


# --- Patient/{id}/$everything ---------------------------------------------------------------------------------------


def _kinds(response: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for resource in entries(response):
        counts[resource["resourceType"]] = counts.get(resource["resourceType"], 0) + 1
    return counts


def test_everything_takes_a_window_of_care_dates(world: RecordWorld, token_for: Any) -> None:
    token = token_for(["patients:read", "emr:read", "appointments:read"], branches=[world.blr])
    today = timezone.localdate()
    path = f"Patient/{world.patient.id}/$everything?_type=Patient,Encounter,Condition"

    recent = fhir_get(token, f"{path}&start={(today - timedelta(days=10)).isoformat()}")
    old = fhir_get(token, f"{path}&end={(today - timedelta(days=100)).isoformat()}")
    both = fhir_get(token, f"{path}&start=2020-01-01&end=2020-12-31")

    assert _kinds(recent) == {"Patient": 1, "Encounter": 1}
    assert ids(recent)[1] == str(world.visit.id)
    assert _kinds(old) == {"Patient": 1, "Encounter": 1, "Condition": 2}
    assert ids(old)[1] == str(world.old_visit.id)
    assert _kinds(both) == {"Patient": 1, "Condition": 1}
    assert ids(both)[1] == str(world.past_diagnosis.id)
    assert recent.json()["total"] == 2
    assert _query(_links(recent)["self"])["start"] == [(today - timedelta(days=10)).isoformat()]


def test_everything_since_and_paging_carry_the_parameters(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ, branches=[world.blr])
    later = timezone.now() + timedelta(minutes=1)
    Diagnosis.objects.filter(pk=world.diagnosis.pk).update(updated_at=later + timedelta(minutes=1))
    since = quote(later.isoformat())

    changed = fhir_get(token, f"Patient/{world.patient.id}/$everything?_since={since}")
    assert ids(changed) == [str(world.diagnosis.id)]

    url = f"Patient/{world.patient.id}/$everything?_type=Encounter,Condition&start=2000-01-01&_count=2"
    seen: list[str] = []
    while url:
        page = fhir_get(token, url)
        assert page.json()["total"] == 4
        seen += ids(page)
        following = _links(page).get("next", "")
        if following:
            assert _query(following)["start"] == ["2000-01-01"]
            assert _query(following)["_type"] == ["Encounter,Condition"]
        url = following.split("/fhir/R4/", 1)[1] if following else ""
    assert len(seen) == len(set(seen)) == 4
    capped = fhir_get(token, f"Patient/{world.patient.id}/$everything?_count=99999")
    assert _query(_links(capped)["self"])["_count"] == ["5000"]
    counted = fhir_get(token, f"Patient/{world.patient.id}/$everything?_count=0").json()
    assert (counted["total"], counted["entry"]) == (13, [])


@pytest.mark.parametrize(
    "query",
    ["start=garbage", "end=2026-13-01", "start=ge2026-01-01", "_since=2026-01-01", "_since=x", "_type=Nope"],
)
def test_everything_refuses_bad_operation_parameters_naming_them(
    world: RecordWorld, token_for: Any, query: str
) -> None:
    response = fhir_get(token_for(ALL_READ), f"Patient/{world.patient.id}/$everything?{query}")

    assert_outcome(response, 400, "invalid", [query.split("=")[0]])


def test_the_capability_statement_lists_what_is_implemented(world: RecordWorld) -> None:
    body = fhir_get(None, "metadata").json()
    resources = {resource["type"]: resource for resource in body["rest"][0]["resource"]}

    for name, resource in resources.items():
        if name != "Slot":
            assert "_lastUpdated" in {param["name"] for param in resource["searchParam"]}, name
    [everything] = [op for op in resources["Patient"]["operation"] if op["name"] == "everything"]
    for parameter in ("start", "end", "_since", "_type", "_count"):
        assert f"`{parameter}`" in everything["documentation"]
    for parameter in ("_summary", "_elements", "_total", "If-None-Match", "406"):
        assert parameter in body["rest"][0]["documentation"]
    assert "paged" in resources["Slot"]["documentation"]
