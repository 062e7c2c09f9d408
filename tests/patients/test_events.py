"""The patient events (docs/api-rules.md §8): `patient.registered` and `patient.updated` are written to the
webhook outbox in the transaction of the change, carry the profile exactly as GET /api/v1/patients/{id}
answers it (the national ID masked), are published only when the record changed, reach a real receiver
signed per Standard Webhooks, and are documented and offered like every other kind."""

from __future__ import annotations

import copy
import json
from datetime import date
from typing import Any

import pytest
from django.db import transaction
from django.test.utils import CaptureQueriesContext

from integrations import tasks
from integrations.webhooks.admin import WebhookSubscriptionForm
from integrations.webhooks.models import WebhookDelivery, WebhookEvent
from integrations.webhooks.registry import PayloadPart, event_kind_get, event_kinds
from patients import services
from patients.events import PATIENT_REGISTERED, PATIENT_UPDATED
from patients.models import Patient
from tests.factories import BranchFactory
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, error_fields, row_counts
from tests.integrations.webhook_receiver import fake_dns, receiver, subscribe, verify
from tests.patients.factories import (
    DiagnosisFactory,
    PatientFactory,
    VisitFactory,
    aadhaar,
    get_patient,
    patch_patient,
    post_patient,
)
from tests.patients.test_admin import form as admin_form
from tests.patients.test_admin import management

pytestmark = pytest.mark.django_db
__all__ = ["fake_dns", "receiver"]

URL = "https://hooks.example.com/patients"
BOTH = [PATIENT_REGISTERED, PATIENT_UPDATED]
AADHAAR = aadhaar("52739184630")  # 527391846301
BODY: dict[str, Any] = {
    "first_name": "Priya",
    "last_name": "Sharma",
    "date_of_birth": "1990-04-12",
    "gender": "female",
    "phone": "+919876543210",
    "email": "priya.sharma@example.com",
    "address": {"line1": "12 MG Road", "city": "Bengaluru", "state": "Karnataka", "pincode": "560001"},
    "blood_group": "O+",
    "national_health_id": "91-1234-5678-9012",
    "national_id": AADHAAR,
    "insurance": [
        {"provider": "Star Health", "policy_number": "SH-0042", "valid_until": "2027-03-31"},
        {"provider": "Niva Bupa", "policy_number": "NB-7", "valid_until": None},
    ],
}
SERVICE_DATA: dict[str, Any] = {
    "first_name": "Rahul",
    "last_name": "Verma",
    "date_of_birth": date(1985, 11, 30),
    "gender": "male",
    "phone": "+919812345678",
}


@pytest.fixture(autouse=True)
def public_dns(fake_dns):
    return fake_dns


@pytest.fixture
def branch():
    return BranchFactory(code="BLR", time_zone="Asia/Kolkata")


@pytest.fixture
def token(branch, token_for):
    return token_for(["patients:write", "patients:read"], branches=[branch])


@pytest.fixture
def queued(monkeypatch):
    """Every deliver task queued after commit (delivery id, claim token), instead of sent to the broker."""
    calls: list[tuple[int, str | None]] = []
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda args, **options: calls.append(tuple(args)))
    return calls


def register(client, token, body=None) -> dict[str, Any]:
    response = post_patient(client, token, body or BODY)
    assert response.status_code == 201, response.content
    return response.json()


def events(event_type: str | None = None) -> list[WebhookEvent]:
    rows = WebhookEvent.objects.order_by("created_at", "id")
    return list(rows.filter(type=event_type) if event_type else rows)


# --- Registration ---------------------------------------------------------------------------------------


def test_a_registration_writes_one_event_with_the_profile_and_one_delivery_per_matching_subscription(
    client, token, branch
):
    other_branch = BranchFactory(code="MUM")
    everywhere, _ = subscribe(URL, [PATIENT_REGISTERED], name="everywhere")
    here, _ = subscribe(URL, BOTH, name="here", branch_ids=[branch.pk])
    subscribe(URL, [PATIENT_REGISTERED], name="elsewhere", branch_ids=[other_branch.pk])
    subscribe(URL, [PATIENT_UPDATED], name="updates only")
    subscribe(URL, ["appointment.booked"], name="appointments")
    subscribe(URL, [PATIENT_REGISTERED], name="inactive", is_active=False)

    created = register(client, token)

    (event,) = events()
    assert (event.type, event.branch_ref, event.is_test) == (PATIENT_REGISTERED, branch.pk, False)
    profile = get_patient(client, token, created["id"]).json()
    assert event.payload == {"patient": profile} == {"patient": created}
    assert [entry["provider"] for entry in event.payload["patient"]["identifiers"]["insurance"]] == [
        "Niva Bupa",
        "Star Health",
    ]
    deliveries = WebhookDelivery.objects.filter(event=event)
    assert {d.subscription_id for d in deliveries} == {everywhere.pk, here.pk}
    assert {(d.status, d.attempt_count) for d in deliveries} == {("pending", 0)}


def test_a_registration_that_rolls_back_publishes_nothing_and_queues_nothing(branch, queued):
    subscribe(URL, BOTH)

    written = []

    def register_then_fail() -> None:
        with transaction.atomic():
            services.patient_create(branch=branch, data=SERVICE_DATA)
            written.append(WebhookEvent.objects.count())  # written with the patient, in its transaction
            raise RuntimeError("the surrounding change fails")

    with pytest.raises(RuntimeError, match="the surrounding change fails"):
        register_then_fail()

    assert written == [1]

    assert not Patient.objects.exists()
    assert not WebhookEvent.objects.exists()
    assert not WebhookDelivery.objects.exists()
    assert queued == []


def test_the_delivery_task_is_queued_only_after_the_registration_commits(
    branch, queued, django_capture_on_commit_callbacks
):
    subscribe(URL, [PATIENT_REGISTERED])

    with django_capture_on_commit_callbacks(execute=True):
        services.patient_create(branch=branch, data=SERVICE_DATA)
        assert queued == []

    assert queued == [(WebhookDelivery.objects.get().pk, None)]


def test_the_national_id_is_never_in_the_event_only_its_masked_form(client, token):
    created = register(client, token)

    stored = json.dumps(WebhookEvent.objects.get().payload)
    assert AADHAAR not in stored
    assert AADHAAR[-4:] in stored
    assert created["identifiers"]["national_id_masked"] == f"XXXX-XXXX-{AADHAAR[-4:]}"


def test_publishing_a_registration_costs_four_statements_and_one_more_with_subscribers(branch):
    def statements(phone: str, *, publish: bool) -> int:
        with CaptureQueriesContext(transaction.get_connection()) as queries:
            services.patient_create(branch=branch, data={**SERVICE_DATA, "phone": phone}, publish=publish)
        return len(queries)

    quiet = statements("+919812340001", publish=False)
    # The profile (the patient with its sections; its visits), the matching subscriptions, the event row.
    assert statements("+919812340002", publish=True) - quiet == 4
    subscribe(URL, [PATIENT_REGISTERED])
    subscribe(URL, [PATIENT_REGISTERED], name="second")
    # ... and the deliveries, all in one insert.
    assert statements("+919812340003", publish=True) - quiet == 5


# --- Updates ----------------------------------------------------------------------------------------------


def test_a_patch_that_changes_something_writes_one_updated_event_with_the_profile_after_it(client, token, branch):
    subscription, _ = subscribe(URL, [PATIENT_UPDATED])
    created = register(client, token)

    response = patch_patient(client, token, created["id"], {"first_name": "Priyanka", "address": {"city": "Mysuru"}})

    assert response.status_code == 200, response.content
    (event,) = events(PATIENT_UPDATED)
    assert (
        event.payload == {"patient": response.json()} == {"patient": get_patient(client, token, created["id"]).json()}
    )
    assert event.payload["patient"]["demographics"]["name"] == "Priyanka Sharma"
    assert event.payload["patient"]["demographics"]["address"]["city"] == "Mysuru"
    assert event.branch_ref == branch.pk
    assert [d.subscription_id for d in event.deliveries.all()] == [subscription.pk]


@pytest.mark.parametrize(
    "change",
    [
        {"phone": "+919876500000"},
        {"national_id": aadhaar("23456789012")},
        {"national_id": None},
        {"national_health_id": None},
        {"insurance": []},
        {"insurance": [{"provider": "Star Health", "policy_number": "SH-0042", "valid_until": "2028-03-31"}]},
        {"email": ""},
        {"address": {"pincode": "570001"}},
    ],
)
def test_each_kind_of_change_publishes_one_update(client, token, change):
    created = register(client, token)

    response = patch_patient(client, token, created["id"], change)

    assert response.status_code == 200, response.content
    (event,) = events(PATIENT_UPDATED)
    assert event.payload == {"patient": response.json()}


def test_a_patch_of_identical_values_publishes_nothing(client, token):
    subscribe(URL, BOTH)
    created = register(client, token)
    same = copy.deepcopy(BODY)
    same["phone"] = "+91 98765 43210"  # the same number, written differently
    same["national_health_id"] = "91123456789012"
    same["insurance"].reverse()  # the same entries in another order
    same.pop("national_id")

    for body in (same, {"national_id": AADHAAR}, {"address": {"city": "Bengaluru"}}, {}):
        response = patch_patient(client, token, created["id"], body)
        assert response.status_code == 200, response.content
        assert response.json() == created

    assert [event.type for event in events()] == [PATIENT_REGISTERED]
    assert WebhookDelivery.objects.count() == 1


def test_a_branch_change_publishes_to_the_new_branchs_subscribers(client, branch, token_for):
    mysuru = BranchFactory(code="MYS")
    token = token_for(["patients:write", "patients:read"], branches=[branch, mysuru])
    subscribe(URL, [PATIENT_UPDATED], name="old branch", branch_ids=[branch.pk])
    new, _ = subscribe(URL, [PATIENT_UPDATED], name="new branch", branch_ids=[mysuru.pk])
    created = register(client, token, {**BODY, "branch_id": str(branch.pk)})

    response = patch_patient(client, token, created["id"], {"branch_id": str(mysuru.pk)})

    assert response.status_code == 200, response.content
    (event,) = events(PATIENT_UPDATED)
    assert (event.branch_ref, event.payload["patient"]["branch_id"]) == (mysuru.pk, str(mysuru.pk))
    assert [d.subscription_id for d in event.deliveries.all()] == [new.pk]


# --- Refused requests publish nothing ---------------------------------------------------------------------


def test_a_refused_registration_publishes_nothing(client, token):
    subscribe(URL, BOTH)
    register(client, token)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    invalid = post_patient(client, token, {**BODY, "phone": "+91 98765 43210", "last_name": ""})
    duplicate = post_patient(client, token, {**BODY, "national_health_id": None, "national_id": None})

    assert error_fields(invalid) == ["last_name"]
    assert_problem(duplicate, 409, "duplicate_patient", existing_patient_id=Patient.objects.get().patient_id,
                   existing_id=str(Patient.objects.get().pk))  # fmt: skip
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    assert [event.type for event in events()] == [PATIENT_REGISTERED]


def test_a_refused_update_publishes_nothing(client, token, branch):
    subscribe(URL, BOTH)
    other = PatientFactory(registration_branch=branch, phone="+919845000111", date_of_birth=date(1970, 2, 3))
    created = register(client, token)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    invalid = patch_patient(client, token, created["id"], {"first_name": "Priyanka", "gender": "none"})
    duplicate = patch_patient(
        client, token, created["id"], {"first_name": "Priyanka", "phone": other.phone, "date_of_birth": "1970-02-03"}
    )

    assert error_fields(invalid) == ["gender"]
    assert_problem(duplicate, 409, "duplicate_patient", existing_patient_id=other.patient_id, existing_id=str(other.pk))
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    assert [event.type for event in events()] == [PATIENT_REGISTERED]


# --- Deactivation and merge -------------------------------------------------------------------------------


def test_a_deactivation_publishes_one_update(client, token, reader):
    created = register(client, token)
    patient = Patient.objects.get()

    services.patient_deactivate(patient=patient, by="staff:asha", reason="Moved abroad")

    (event,) = events(PATIENT_UPDATED)
    assert event.payload == {"patient": get_patient(client, reader, created["id"]).json()}


def test_a_merge_publishes_one_update_for_the_survivor_at_its_branch(client, branch, reader):
    elsewhere = BranchFactory(code="MUM")
    survivor = PatientFactory(registration_branch=branch, first_name="Kavya", last_name="Menon")
    duplicate = PatientFactory(registration_branch=elsewhere, first_name="Kavya", last_name="Menon")
    DiagnosisFactory(patient=duplicate)
    VisitFactory(patient=duplicate)
    here, _ = subscribe(URL, [PATIENT_UPDATED], name="here", branch_ids=[branch.pk])
    subscribe(URL, [PATIENT_UPDATED], name="the duplicate's branch", branch_ids=[elsewhere.pk])

    services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason="Registered twice")

    (event,) = events()
    assert (event.type, event.branch_ref) == (PATIENT_UPDATED, branch.pk)
    profile = get_patient(client, reader, str(survivor.pk)).json()
    assert event.payload == {"patient": profile}
    assert [d["code"] for d in profile["medical_summary"]["diagnoses"]] == ["E11.9"]  # the duplicate's
    assert len(profile["visit_history"]) == 1
    assert [d.subscription_id for d in event.deliveries.all()] == [here.pk]


# --- The admin --------------------------------------------------------------------------------------------


def test_registering_in_the_admin_publishes_once_with_the_insurance_entered_on_the_page(admin_client, branch):
    subscribe(URL, BOTH)
    data = admin_form(
        branch,
        national_id=AADHAAR,
        **{
            **management({"insurance": 1}),
            "insurance-0-provider": "Star Health",
            "insurance-0-policy_number": "SH-1",
            "insurance-0-valid_until": "",
        },
    )

    response = admin_client.post("/admin/patients/patient/add/", data)

    assert response.status_code == 302, response.content[:2000]
    (event,) = events()
    assert event.type == PATIENT_REGISTERED
    patient = event.payload["patient"]
    assert patient["identifiers"]["insurance"] == [
        {"provider": "Star Health", "policy_number": "SH-1", "valid_until": None}
    ]
    assert patient["identifiers"]["national_id_masked"] == f"XXXX-XXXX-{AADHAAR[-4:]}"
    assert AADHAAR not in json.dumps(event.payload)
    assert WebhookDelivery.objects.count() == 1


def test_an_admin_edit_publishes_when_the_patient_or_its_insurance_changed_and_not_otherwise(
    admin_client, branch, reader, client
):
    patient = PatientFactory(
        registration_branch=branch,
        first_name="Priya",
        last_name="Sharma",
        date_of_birth=date(1990, 4, 12),
        phone="+919876543210",
        email="priya@example.com",
        address_line1="12 MG Road",
        address_city="Bengaluru",
        address_state="Karnataka",
        address_pincode="560001",
    )
    url = f"/admin/patients/patient/{patient.pk}/change/"
    unchanged = admin_form(branch, phone="+919876543210")

    def save(data: dict[str, str]) -> None:
        response = admin_client.post(url, data)
        assert response.status_code == 302, response.content[:2000]

    save(unchanged)
    assert events() == []

    save({**unchanged, "first_name": "Priyanka"})
    (renamed,) = events(PATIENT_UPDATED)
    assert renamed.payload["patient"]["demographics"]["first_name"] == "Priyanka"

    insurance = {
        **management({"insurance": 1}),
        "insurance-0-provider": "Star Health",
        "insurance-0-policy_number": "SH-1",
        "insurance-0-valid_until": "",
    }
    save({**unchanged, "first_name": "Priyanka", **insurance})
    insured = events(PATIENT_UPDATED)[-1]
    assert insured.payload == {"patient": get_patient(client, reader, str(patient.pk)).json()}
    assert insured.payload["patient"]["identifiers"]["insurance"][0]["policy_number"] == "SH-1"

    diagnosis = {
        **management({"diagnoses": 1}),
        "diagnoses-0-code": "E11.9",
        "diagnoses-0-system": "ICD-10",
        "diagnoses-0-description": "Type 2 diabetes",
        "diagnoses-0-status": "active",
    }
    save({**unchanged, "first_name": "Priyanka", **diagnosis})  # a clinical entry: not a patient change
    assert patient.diagnoses.count() == 1
    assert len(events(PATIENT_UPDATED)) == 2


def test_the_admin_actions_publish_through_the_services(admin_client, branch):
    survivor = PatientFactory(registration_branch=branch)
    duplicate = PatientFactory(registration_branch=branch)
    leaving = PatientFactory(registration_branch=branch)

    deactivated = admin_client.post(
        "/admin/patients/patient/",
        {"action": "deactivate", "_selected_action": [str(leaving.pk)], "confirm": "yes", "reason": "Moved"},
    )
    merged = admin_client.post(
        "/admin/patients/patient/",
        {
            "action": "merge",
            "_selected_action": [str(duplicate.pk)],
            "confirm": "yes",
            "target": survivor.patient_id,
            "reason": "Registered twice",
        },
    )

    assert (deactivated.status_code, merged.status_code) == (302, 302)
    assert [(e.type, e.payload["patient"]["id"]) for e in events()] == [
        (PATIENT_UPDATED, str(leaving.pk)),
        (PATIENT_UPDATED, str(survivor.pk)),
    ]


# --- Delivery end to end ----------------------------------------------------------------------------------


def test_a_registration_reaches_a_real_receiver_signed_with_the_profile(
    client, token, receiver, queued, django_capture_on_commit_callbacks
):
    subscription, secret = subscribe(receiver.url(), [PATIENT_REGISTERED])

    with django_capture_on_commit_callbacks(execute=True):
        created = register(client, token)
    (task_args,) = queued
    assert tasks.deliver_webhook(*task_args) == "succeeded"  # the task the worker runs

    (received,) = receiver.wait_for(1)
    body = verify(received, secret)  # standardwebhooks.Webhook(secret).verify(body, headers)
    event = WebhookEvent.objects.get()
    profile = get_patient(client, token, created["id"]).json()
    assert body == {
        "id": str(event.id),
        "type": PATIENT_REGISTERED,
        "timestamp": event.created_at.isoformat(),
        "data": {"patient": profile},
    }
    assert received.headers["webhook-id"] == str(event.id)
    assert AADHAAR.encode() not in received.body
    assert f"XXXX-XXXX-{AADHAAR[-4:]}".encode() in received.body
    delivery = WebhookDelivery.objects.get()
    assert (delivery.subscription_id, delivery.status, delivery.last_status_code) == (subscription.pk, "succeeded", 200)


# --- Declared like every kind: registry, OpenAPI document, subscription form ------------------------------


def test_both_kinds_are_registered_with_the_profile_as_payload_and_no_notification():
    for name in BOTH:
        kind = event_kind_get(name)
        assert kind.payload == (PayloadPart("patient", "PatientProfile"),)
        assert not kind.notifies
    assert "replace what you hold" in event_kind_get(PATIENT_UPDATED).description


def test_the_openapi_document_lists_both_with_the_patient_profile_as_payload(client):
    response = client.get("/api/v1/schema", {"format": "json"})

    assert response.status_code == 200
    schema = json.loads(response.content)
    assert "PatientProfile" in schema["components"]["schemas"]
    for name in BOTH:
        envelope = schema["webhooks"][name]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert envelope["properties"]["type"]["enum"] == [name]
        assert envelope["properties"]["data"] == {
            "type": "object",
            "required": ["patient"],
            "properties": {"patient": {"$ref": "#/components/schemas/PatientProfile"}},
        }


def test_the_subscription_form_and_page_offer_both(admin_client):
    choices = dict(WebhookSubscriptionForm().fields["event_types"].choices)
    assert choices[PATIENT_REGISTERED] == "patient.registered: A patient was registered."
    assert choices[PATIENT_UPDATED].startswith("patient.updated: A patient's record changed")
    assert list(choices) == [kind.name for kind in event_kinds()]

    page = admin_client.get("/admin/integrations/webhooksubscription/add/").content.decode()
    for name in BOTH:
        assert f'name="event_types" value="{name}"' in page
