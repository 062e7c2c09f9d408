"""Prescriptions under /api/v1/pharmacy/prescriptions (docs/api-rules.md §14): create with gap-free numbers,
detail with dispensed and remaining quantities, list filters, cancel; active prescriptions in the patient
profile's current medications."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from patients.models import Medication
from pharmacy.models import Prescription
from tests.billing.factories import body, get, post_json
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, error_fields, row_counts
from tests.pharmacy.factories import PRESCRIPTIONS, PharmacyWorld, make_pharmacy_world, today

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(token_for) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


def _payload(world: PharmacyWorld, **changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "patient_id": world.patient.patient_id,
        "doctor_id": str(world.doctor.id),
        "items": [
            {
                "drug": "AMOX500",
                "dose": "1 capsule",
                "frequency": "three times a day",
                "route": "oral",
                "duration_days": 5,
                "quantity": 15,
                "instructions": "After food",
            },
            {
                "drug": "PARA500",
                "dose": "1 tablet",
                "frequency": "when needed",
                "route": "oral",
                "duration_days": 3,
                "quantity": 6,
            },
        ],
    }
    payload.update(changes)
    return payload


def test_a_prescription_is_created_numbered_and_shown_whole(client, world):
    response = post_json(client, world.writer, PRESCRIPTIONS, _payload(world))

    assert response.status_code == 201, response.content
    prescription = Prescription.objects.get()
    amox, para = prescription.items.order_by("position")
    assert response["Location"] == f"{PRESCRIPTIONS}/{prescription.id}"
    assert body(response) == {
        "id": str(prescription.id),
        "prescription_id": str(prescription.id),
        "prescription_number": f"BLR-RX-{today().year}-000001",
        "status": "active",
        "patient": {"id": str(world.patient.id), "patient_id": world.patient.patient_id, "name": world.patient.name},
        "doctor": {"id": str(world.doctor.id), "name": "Dr. Anil Rao"},
        "branch_id": str(world.blr.id),
        "appointment_id": None,
        "items": [
            {
                "id": str(amox.id),
                "item_id": str(amox.id),
                "drug": {
                    "code": "AMOX500",
                    "name": "Amoxicillin 500 mg capsule",
                    "brand_name": "Mox",
                    "schedule": "H",
                    "unit": "capsule",
                },
                "dose": "1 capsule",
                "frequency": "three times a day",
                "route": "oral",
                "duration_days": 5,
                "quantity": 15,
                "instructions": "After food",
                "dispensed": 0,
                "remaining": 15,
            },
            {
                "id": str(para.id),
                "item_id": str(para.id),
                "drug": {
                    "code": "PARA500",
                    "name": "Paracetamol 500 mg tablet",
                    "brand_name": "Crocin",
                    "schedule": "OTC",
                    "unit": "tablet",
                },
                "dose": "1 tablet",
                "frequency": "when needed",
                "route": "oral",
                "duration_days": 3,
                "quantity": 6,
                "instructions": None,
                "dispensed": 0,
                "remaining": 6,
            },
        ],
        "created_by": prescription.created_by,
        "created_at": prescription.created_at.astimezone(world.blr.zone).isoformat(),
        "cancelled_at": None,
        "cancellation_reason": None,
    }
    second = post_json(client, world.writer, PRESCRIPTIONS, _payload(world))
    assert body(second)["prescription_number"] == f"BLR-RX-{today().year}-000002"


def test_active_prescriptions_are_current_medications_in_the_profile_until_cancelled(client, world, token_for):
    reader = token_for(["patients:read"], branches=[world.blr])
    created = body(post_json(client, world.writer, PRESCRIPTIONS, _payload(world)))

    profile = body(get(client, reader, f"/api/v1/patients/{world.patient.patient_id}"))
    start = today().isoformat()
    # Both start today; the profile orders them by start date, then id.
    assert sorted(profile["medical_summary"]["medications"], key=lambda m: m["name"]) == [
        {
            "name": "Amoxicillin 500 mg capsule",
            "dosage": "1 capsule",
            "frequency": "three times a day",
            "start_date": start,
        },
        {"name": "Paracetamol 500 mg tablet", "dosage": "1 tablet", "frequency": "when needed", "start_date": start},
    ]
    assert set(Medication.objects.values_list("end_date", flat=True)) == {
        today() + timedelta(days=4),
        today() + timedelta(days=2),
    }

    cancelled = post_json(
        client, world.writer, f"{PRESCRIPTIONS}/{created['prescription_id']}/cancel", {"reason": "Wrong drug"}
    )

    assert cancelled.status_code == 200, cancelled.content
    assert (body(cancelled)["status"], body(cancelled)["cancellation_reason"]) == ("cancelled", "Wrong drug")
    assert [item["remaining"] for item in body(cancelled)["items"]] == [0, 0]
    profile = body(get(client, reader, f"/api/v1/patients/{world.patient.patient_id}"))
    assert profile["medical_summary"]["medications"] == []


def test_cancelling_twice_is_409_and_a_blank_reason_400_both_changing_nothing(client, world):
    prescription = world.prescribe((world.amox, 5))
    url = f"{PRESCRIPTIONS}/{prescription.id}/cancel"
    blank = post_json(client, world.writer, url, {"reason": "  "})
    assert error_fields(blank) == ["reason"]
    post_json(client, world.writer, url, {"reason": "Wrong"})
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    again = post_json(client, world.writer, url, {"reason": "Wrong"})

    assert_problem(again, 409, "invalid_state", current_status="cancelled")
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


@pytest.mark.parametrize(
    ("item_changes", "fields"),
    [
        ({"quantity": 0}, ["items.0.quantity"]),
        ({"quantity": 2.5}, ["items.0.quantity"]),
        ({"duration_days": 0}, ["items.0.duration_days"]),
        ({"duration_days": 366}, ["items.0.duration_days"]),
        ({"drug": "NOPE"}, ["items.0.drug"]),
        ({"dose": "x" * 51}, ["items.0.dose"]),
        ({"colour": "red"}, ["items.0.colour"]),
    ],
)
def test_bad_items_are_400s_naming_the_field(client, world, item_changes, fields):
    payload = _payload(world)
    payload["items"][0].update(item_changes)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, world.writer, PRESCRIPTIONS, payload)

    assert error_fields(response) == fields
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_a_drug_twice_a_doctor_elsewhere_and_no_items_are_400s(client, world):
    twice = _payload(world)
    twice["items"][1]["drug"] = "AMOX500"
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    duplicate = post_json(client, world.writer, PRESCRIPTIONS, twice)
    elsewhere = post_json(client, world.writer, PRESCRIPTIONS, _payload(world, doctor_id=str(world.mum_doctor.id)))
    empty = post_json(client, world.writer, PRESCRIPTIONS, _payload(world, items=[]))

    assert error_fields(duplicate) == ["items.1.drug"]
    assert error_fields(elsewhere) == ["doctor_id"]
    assert error_fields(empty) == ["items"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_the_detail_shows_dispensed_and_remaining_and_another_branchs_is_404(client, world):
    world.receive(world.amox, "B", 20)
    prescription = world.prescribe((world.amox, 10))
    world.dispense((world.amox, 4), prescription=prescription)
    other = world.prescribe((world.amox, 1), branch=world.mum, doctor=world.mum_doctor)

    mine = get(client, world.reader, f"{PRESCRIPTIONS}/{prescription.id}")
    theirs = get(client, world.reader, f"{PRESCRIPTIONS}/{other.id}")
    malformed = get(client, world.reader, f"{PRESCRIPTIONS}/not-a-uuid")

    assert [(i["dispensed"], i["remaining"]) for i in body(mine)["items"]] == [(4, 6)]
    assert_problem(theirs, 404, "not_found")
    assert_problem(malformed, 404, "not_found")


def test_the_list_filters_and_its_query_count_is_pinned(client, world, django_assert_num_queries):
    first = world.prescribe((world.amox, 10))
    second = world.prescribe((world.para, 10))
    world.prescribe((world.amox, 1), branch=world.mum, doctor=world.mum_doctor)
    post_json(client, world.writer, f"{PRESCRIPTIONS}/{first.id}/cancel", {"reason": "x"})

    with django_assert_num_queries(4):  # a short page: no COUNT; the client's branches come with the token
        everything = get(client, world.reader, PRESCRIPTIONS)
    active = get(client, world.reader, PRESCRIPTIONS, {"status": "active", "patient_id": str(world.patient.id)})
    dated = get(client, world.reader, PRESCRIPTIONS, {"date_from": (today() + timedelta(days=1)).isoformat()})
    hidden = get(client, world.reader, PRESCRIPTIONS, {"branch_id": str(world.mum.id)})

    assert [p["prescription_id"] for p in body(everything)] == [str(second.id), str(first.id)]
    assert [p["prescription_id"] for p in body(active)] == [str(second.id)]
    assert body(dated) == []
    # docs/api-rules.md §5.4: another branch's id finds nothing, as an unknown one would.
    assert (hidden.status_code, body(hidden), hidden["X-Total-Count"]) == (200, [], "0")
