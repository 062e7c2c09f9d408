"""A patient's address names its state from the closed list (docs/api-rules.md §12): the API reads the name
(case and spacing ignored, official former names), the ISO 3166-2:IN code or the GST state code, stores
and returns the canonical name, and refuses anything else with a 400 on `address.state`. Migration 0011
normalises the stored values and leaves (and reports) those it does not recognise."""

from __future__ import annotations

import copy
import importlib
import json
import logging
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

from clinic.api.serializers import STATE_FORMS
from patients.models import Patient
from tests.factories import BranchFactory
from tests.helpers import REQUEST_BOOKKEEPING, assert_field_errors, assert_problem, row_counts
from tests.patients.factories import PatientFactory, get_patient, patch_patient, post_patient

pytestmark = pytest.mark.django_db

migration = importlib.import_module("patients.migrations.0011_address_state_choices")

BODY: dict[str, Any] = {
    "first_name": "Priya",
    "last_name": "Sharma",
    "date_of_birth": "1990-04-12",
    "gender": "female",
    "phone": "+919876543210",
    "address": {"line1": "12 MG Road", "city": "Bengaluru", "state": "Karnataka", "pincode": "560001"},
}
REFUSED = [
    {
        "field": "address.state",
        "code": "invalid_choice",
        "message": "Not an Indian state or union territory. Send its name (Karnataka), its ISO 3166-2:IN code "
        "(IN-KA) or its two-digit GST state code (29).",
    }
]


def with_state(state: Any) -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["address"]["state"] = state
    return body


@pytest.fixture
def branch():
    return BranchFactory(code="BLR")


@pytest.fixture
def token(branch, token_for):
    return token_for(["patients:write", "patients:read"], branches=[branch])


# --- Create -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "canonical"),
    [
        ("Karnataka", "Karnataka"),
        ("karnataka", "Karnataka"),
        ("  KARNATAKA ", "Karnataka"),
        ("IN-KA", "Karnataka"),
        ("in-ka", "Karnataka"),
        ("29", "Karnataka"),
        (29, "Karnataka"),  # a JSON number
        (7, "Delhi"),  # the number 7 is GST code 07
        ("Orissa", "Odisha"),
        ("Andaman & Nicobar Islands", "Andaman and Nicobar Islands"),
        ("tamilnadu", "Tamil Nadu"),
        ("IN-TS", "Telangana"),
    ],
)
def test_each_accepted_form_is_stored_and_returned_as_the_canonical_name(client, token, sent, canonical):
    response = post_patient(client, token, with_state(sent))

    assert response.status_code == 201, response.content
    assert response.json()["demographics"]["address"] == {
        "line1": "12 MG Road",
        "city": "Bengaluru",
        "state": canonical,
        "pincode": "560001",
    }
    assert Patient.objects.get().address_state == canonical
    assert get_patient(client, token, response.json()["id"]).json()["demographics"]["address"]["state"] == canonical


@pytest.mark.parametrize("sent", ["", "   "])
def test_a_blank_state_is_allowed_and_means_unknown(client, token, sent):
    response = post_patient(client, token, with_state(sent))

    assert response.status_code == 201, response.content
    assert response.json()["demographics"]["address"]["state"] == ""
    assert Patient.objects.get().address_state == ""


def test_an_address_without_a_state_is_allowed(client, token):
    body = copy.deepcopy(BODY)
    del body["address"]["state"]

    response = post_patient(client, token, body)

    assert response.status_code == 201, response.content
    assert Patient.objects.get().address_state == ""


@pytest.mark.parametrize(
    "sent",
    [
        "97",  # GST "Other Territory"
        "99",
        "28",  # Andhra Pradesh before Telangana: either of two states today
        "IN-XX",
        "KA",
        "Karnatka",
        "Karnataka State",
        "\uff12\uff19",  # full-width digits
        "\u0968\u096f",  # Devanagari 29
        "\u212aarnataka",  # Kelvin sign
        "7",
        130,
        -29,
    ],
)
def test_anything_else_is_a_400_on_address_state_and_writes_nothing(client, token, sent):
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_patient(client, token, with_state(sent))

    assert_field_errors(response, REFUSED)
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


@pytest.mark.parametrize(
    ("sent", "code"),
    [(True, "invalid"), (29.0, "invalid"), (None, "null"), (["Karnataka"], "invalid"), ({"name": "Goa"}, "invalid")],
)
def test_a_state_that_is_not_text_is_a_400_on_address_state(client, token, sent, code):
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_patient(client, token, with_state(sent))

    problem = assert_problem(response, 400, "validation_error")
    assert [(error["field"], error["code"]) for error in problem["errors"]] == [("address.state", code)]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_a_nul_byte_in_the_state_is_a_400_on_address_state(client, token):
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_patient(client, token, with_state("Karnataka\u0000"))

    problem = assert_problem(response, 400, "validation_error")
    assert [(error["field"], error["code"]) for error in problem["errors"]] == [
        ("address.state", "null_characters_not_allowed")
    ]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_a_bad_state_is_named_beside_the_other_bad_fields(client, token):
    body = with_state("Karnatka")
    body["address"]["pincode"] = "0123"

    response = post_patient(client, token, body)

    assert sorted(error["field"] for error in assert_problem(response, 400, "validation_error")["errors"]) == [
        "address.pincode",
        "address.state",
    ]
    assert not Patient.objects.exists()


# --- PATCH ------------------------------------------------------------------------------------------


@pytest.fixture
def patient(branch):
    return PatientFactory(address_city="Mysuru", address_state="Karnataka", registration_branch=branch)


def stored(patient: Patient) -> dict[str, Any]:
    return Patient.objects.filter(pk=patient.pk).values().get()


@pytest.mark.parametrize(
    ("sent", "canonical"), [("in-tg", "Telangana"), ("33", "Tamil Nadu"), ("Pondicherry", "Puducherry")]
)
def test_patch_stores_and_returns_the_canonical_name(client, token, patient, sent, canonical):
    response = patch_patient(client, token, patient.patient_id, {"address": {"state": sent}})

    assert response.status_code == 200, response.content
    assert response.json()["demographics"]["address"]["state"] == canonical
    assert response.json()["demographics"]["address"]["city"] == "Mysuru"
    assert Patient.objects.get(pk=patient.pk).address_state == canonical


def test_patch_with_a_blank_state_forgets_it(client, token, patient):
    response = patch_patient(client, token, patient.patient_id, {"address": {"state": ""}})

    assert response.status_code == 200, response.content
    assert Patient.objects.get(pk=patient.pk).address_state == ""


@pytest.mark.parametrize("sent", ["97", "IN-XX", "Karnatka", "\uff12\uff19"])
def test_patch_with_a_bad_state_is_a_400_and_changes_nothing(client, token, patient, sent):
    before, counts = stored(patient), row_counts(exclude=REQUEST_BOOKKEEPING)

    response = patch_patient(client, token, patient.patient_id, {"first_name": "Asha", "address": {"state": sent}})

    assert_field_errors(response, REFUSED)
    assert stored(patient) == before
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_patch_of_other_fields_keeps_an_unrecognised_legacy_state(client, token, branch):
    legacy = PatientFactory(address_state="Karnatka", registration_branch=branch)

    response = patch_patient(client, token, legacy.patient_id, {"first_name": "Asha"})

    assert response.status_code == 200, response.content
    assert response.json()["demographics"]["address"]["state"] == "Karnatka"
    assert Patient.objects.get(pk=legacy.pk).address_state == "Karnatka"


# --- The admin --------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["karnataka", "IN-KA", "29", "Karnatka"])
def test_the_admin_form_refuses_a_state_that_is_not_one_of_the_names(admin_client, branch, value):
    patient = PatientFactory(address_state="Karnataka", registration_branch=branch)
    page = admin_client.get(f"/admin/patients/patient/{patient.pk}/change/").content.decode()
    assert '<select name="address_state"' in page
    assert '<option value="Dadra and Nagar Haveli and Daman and Diu">' in page

    data = {
        "first_name": patient.first_name,
        "last_name": patient.last_name,
        "date_of_birth": patient.date_of_birth.isoformat(),
        "gender": patient.gender,
        "is_active": "on",
        "phone": patient.phone,
        "address_state": value,
        "registration_branch": str(branch.pk),
    }
    for prefix in ("insurance", "diagnoses", "allergies", "medications", "visits"):
        data |= {f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"}
    response = admin_client.post(f"/admin/patients/patient/{patient.pk}/change/", data)

    assert response.status_code == 200
    assert f"Select a valid choice. {value} is not one of the available choices." in response.content.decode()
    assert Patient.objects.get(pk=patient.pk).address_state == "Karnataka"


# --- The OpenAPI document ---------------------------------------------------------------------------


def test_the_document_says_which_forms_the_state_takes_and_what_comes_back():
    document = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    schemas = document["components"]["schemas"]

    assert schemas["AddressRequest"]["properties"]["state"] == {
        "type": "string",
        "description": f"{STATE_FORMS} Stored and returned as the name.",
    }
    assert schemas["PatchedPatientWriteRequest"]["properties"]["address"] == {
        "$ref": "#/components/schemas/AddressRequest"
    }
    assert schemas["PatientAddress"]["properties"]["state"] == {
        "type": "string",
        "description": "The name of an Indian state or union territory, e.g. Karnataka (the names a branch's state "
        "takes); empty when unknown. Records registered before the state was checked may hold an unrecognised value.",
    }
    parameters = document["paths"]["/api/v1/branches"]["get"]["parameters"]
    assert next(parameter for parameter in parameters if parameter["name"] == "state") == {
        "in": "query",
        "name": "state",
        "schema": {"type": "string", "minLength": 1, "pattern": "^[^\\x00-\\x1F\\x7F]*$"},
        "description": f"Only branches in this state. {STATE_FORMS}",
    }


# --- Migration 0011 ---------------------------------------------------------------------------------


def test_the_migration_maps_every_recognised_value_and_reports_each_row_it_leaves(capsys, caplog):
    branch = BranchFactory(code="BLR")
    raw = {
        "karnataka": "Karnataka",
        " IN-KA ": "Karnataka",
        "29": "Karnataka",
        "Karnataka": "Karnataka",
        "Orissa": "Odisha",
        "tamil  nadu": "Tamil Nadu",
        "NCT of Delhi": "Delhi",
        "": "",
        "   ": "",
        "Karnatka": "Karnatka",  # not guessed at
        "97": "97",
        "Mumbai": "Mumbai",
    }
    patients = {value: PatientFactory(address_state=value, registration_branch=branch) for value in raw}
    PatientFactory(address_state="karnataka", registration_branch=branch)  # a second row of one value
    updated_at = dict(Patient.objects.values_list("id", "updated_at"))

    with caplog.at_level(logging.INFO, logger=migration.__name__):
        migration.address_states_normalise(apps, connection.schema_editor())

    for value, expected in raw.items():
        assert Patient.objects.get(pk=patients[value].pk).address_state == expected, value
    assert Patient.objects.filter(address_state="Karnataka").count() == 5
    assert dict(Patient.objects.values_list("id", "updated_at")) == updated_at  # not an edit of the patient
    left = sorted([patients["Karnatka"], patients["97"], patients["Mumbai"]], key=lambda p: p.patient_id)
    expected_lines = [
        "patients: address_state normalised on 8 rows (7 distinct values).",
        *(
            f"patients: {p.patient_id} address_state {p.address_state!r} is not an Indian state or union territory;"
            " left unchanged."
            for p in left
        ),
        "patients: 3 rows keep an unrecognised address_state; correct them in the admin.",
    ]
    assert capsys.readouterr().out.splitlines() == expected_lines
    assert [record.getMessage() for record in caplog.records] == expected_lines


def test_the_migration_is_silent_when_every_value_is_canonical_or_blank(capsys):
    PatientFactory(address_state="Karnataka")
    PatientFactory(address_state="")

    migration.address_states_normalise(apps, connection.schema_editor())

    assert capsys.readouterr().out == ""
    assert sorted(Patient.objects.values_list("address_state", flat=True)) == ["", "Karnataka"]


def test_the_migration_reads_the_distinct_values_once_and_updates_in_one_statement(django_assert_num_queries):
    for value in ["karnataka", "IN-KA", "29", "orissa", "Goa", "goa", "Karnatka"]:
        PatientFactory.create_batch(2, address_state=value)

    # The distinct values, one UPDATE for every mapped value, the rows left as they were.
    with django_assert_num_queries(3):
        migration.address_states_normalise(apps, connection.schema_editor())

    assert sorted(set(Patient.objects.values_list("address_state", flat=True))) == [
        "Goa",
        "Karnataka",
        "Karnatka",
        "Odisha",
    ]
