"""Slot from the free-cell rule: the cells the REST slots list offers, searched by practitioner and start,
read back by id while still free."""

from __future__ import annotations

from datetime import time, timedelta
from typing import Any

import pytest

from appointments.models import WeeklySession
from integrations.fhir import r4
from tests.appointments.factories import AppointmentFactory, WeeklySessionFactory, at, future_monday
from tests.emr.world import RecordWorld
from tests.integrations.fhir.helpers import assert_outcome, entries, fhir_get

pytestmark = pytest.mark.django_db


@pytest.fixture
def monday(world: RecordWorld) -> Any:
    doctor = world.pharmacy.doctor
    doctor.default_slot_minutes = 30
    doctor.save(update_fields=["default_slot_minutes"])
    WeeklySessionFactory(
        doctor=doctor, branch=world.blr, weekday=WeeklySession.Weekday.MONDAY, start=time(9, 0), end=time(11, 0)
    )
    return future_monday()


def test_slots_are_the_free_cells_and_read_back(world: RecordWorld, token_for: Any, monday: Any) -> None:
    doctor = world.pharmacy.doctor
    AppointmentFactory(
        patient=world.patient,
        doctor=doctor,
        branch=world.blr,
        slot_start=at(monday, 9, 30, world.blr),
        slot_end=at(monday, 10, 0, world.blr),
    )
    token = token_for(["appointments:read"])

    response = fhir_get(token, f"Slot?practitioner=Practitioner/{doctor.id}&start={monday.isoformat()}")

    slots = entries(response)
    r4.validate(response.json())
    assert [(slot["start"], slot["end"], slot["status"]) for slot in slots] == [
        (f"{monday.isoformat()}T09:00:00+05:30", f"{monday.isoformat()}T09:30:00+05:30", "free"),
        (f"{monday.isoformat()}T10:00:00+05:30", f"{monday.isoformat()}T10:30:00+05:30", "free"),
        (f"{monday.isoformat()}T10:30:00+05:30", f"{monday.isoformat()}T11:00:00+05:30", "free"),
    ]
    assert slots[0]["schedule"] == {
        "identifier": {"system": "https://clinic.invalid/fhir/sid/schedule", "value": f"{doctor.id}/BLR"},
        "display": "Dr. Anil Rao at Bengaluru Central Clinic",
    }
    assert fhir_get(token, f"Slot/{slots[0]['id']}").json() == slots[0]
    week = fhir_get(
        token,
        f"Slot?practitioner={doctor.id}&start=ge{(monday - timedelta(days=3)).isoformat()}&start=le{monday.isoformat()}",
    )
    assert len(entries(week)) == 3


def test_a_booked_or_unknown_slot_is_404_and_bad_searches_400(world: RecordWorld, token_for: Any, monday: Any) -> None:
    doctor = world.pharmacy.doctor
    token = token_for(["appointments:read"])
    first = entries(fhir_get(token, f"Slot?practitioner={doctor.id}&start={monday.isoformat()}"))[0]
    AppointmentFactory(
        patient=world.patient,
        doctor=doctor,
        branch=world.blr,
        slot_start=at(monday, 9, 0, world.blr),
        slot_end=at(monday, 9, 30, world.blr),
    )

    assert_outcome(fhir_get(token, f"Slot/{first['id']}"), 404, "not-found")
    for key in ("nope", "x-y-z", f"{doctor.id.hex}-BLR-99999999999999999", f"{doctor.id.hex}-MUM-1"):
        assert_outcome(fhir_get(token, f"Slot/{key}"), 404, "not-found")
    assert_outcome(fhir_get(token, f"Slot?start={monday.isoformat()}"), 400, "invalid", ["practitioner"])
    assert_outcome(fhir_get(token, f"Slot?practitioner={doctor.id}"), 400, "invalid", ["start"])
    assert_outcome(fhir_get(token, f"Slot?practitioner={doctor.id}&start=ge2026-01-01"), 400, "invalid", ["start"])
    assert_outcome(
        fhir_get(token, f"Slot?practitioner={doctor.id}&start=ge2026-01-01&start=le2026-03-01"),
        400,
        "invalid",
        ["start"],
    )
    assert_outcome(
        fhir_get(token, f"Slot?practitioner={world.pharmacy.mum_doctor.id}&start=2026-01-01&serach=1"),
        400,
        "not-supported",
        ["serach"],
    )


def test_a_restricted_client_sees_no_slots_of_another_branch(world: RecordWorld, token_for: Any, monday: Any) -> None:
    token = token_for(["appointments:read"], branches=[world.mum])

    response = fhir_get(token, f"Slot?practitioner={world.pharmacy.doctor.id}&start={monday.isoformat()}")

    assert_outcome(response, 400, "invalid", ["practitioner"])
