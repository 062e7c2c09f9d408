"""FHIR_VALIDATE_OUTPUT: how much of what the server emits is checked against the R4 models at run time."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.fhir import r4

GOOD = {"resourceType": "Patient", "id": "a", "gender": "female"}
BAD = {"resourceType": "Patient", "id": "b", "gender": "woman"}  # outside the required value set
GOOD_OBSERVATION = {
    "resourceType": "Observation",
    "id": "c",
    "status": "final",
    "code": {"text": "Haemoglobin"},
}
BAD_OBSERVATION = {**GOOD_OBSERVATION, "id": "d", "status": "done"}


def bundle(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": len(resources),
        "entry": [{"fullUrl": f"https://x.invalid/{r['id']}", "resource": r} for r in resources],
    }


def test_all_checks_every_entry(settings):
    settings.FHIR_VALIDATE_OUTPUT = "all"

    with pytest.raises(r4.ValueSetError, match=r"gender.*'woman'"):
        r4.check(bundle(GOOD, BAD))


def test_sample_checks_the_first_entry_of_each_type_and_the_bundle_itself(settings):
    settings.FHIR_VALIDATE_OUTPUT = "sample"

    assert r4.check(body := bundle(GOOD, BAD, GOOD_OBSERVATION)) is body  # the second Patient is not checked
    with pytest.raises(r4.ValueSetError, match=r"gender.*'woman'"):
        r4.check(bundle(BAD, GOOD))
    with pytest.raises(r4.ValueSetError, match=r"status.*'done'"):
        r4.check(bundle(GOOD, BAD_OBSERVATION, GOOD_OBSERVATION))
    with pytest.raises(r4.ValueSetError, match=r"type.*'list'"):
        r4.check({**bundle(GOOD), "type": "list"})


def test_sample_checks_a_single_resource_whole(settings):
    settings.FHIR_VALIDATE_OUTPUT = "sample"

    with pytest.raises(r4.ValueSetError):
        r4.check(BAD)


def test_off_checks_nothing(settings):
    settings.FHIR_VALIDATE_OUTPUT = "off"

    assert r4.check(bundle(BAD)) == bundle(BAD)
    assert r4.check_line(BAD, 0, every=10) is BAD


def test_export_lines_are_sampled_one_per_chunk(settings):
    settings.FHIR_VALIDATE_OUTPUT = "sample"

    assert r4.check_line(BAD, 3, every=10) is BAD
    with pytest.raises(r4.ValueSetError):
        r4.check_line(BAD, 20, every=10)
    settings.FHIR_VALIDATE_OUTPUT = "all"
    with pytest.raises(r4.ValueSetError):
        r4.check_line(BAD, 3, every=10)
