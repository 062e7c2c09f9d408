"""Reception journeys in Chromium at 1366x768, as a receptionist of one branch (not a superuser), logged in
through the login page with password and authenticator code: find a patient and register twins after the
confirmation, book from the slot picker, check a patient in from today's queue, reschedule and cancel."""

from __future__ import annotations

from datetime import date, time, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from appointments.models import Appointment, WeeklySession
from patients.models import Patient
from tests.appointments.factories import AppointmentFactory, future_monday
from tests.browser.conftest import current_totp_code
from tests.factories import BranchFactory, DoctorFactory, staff_of
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "reception-test-password"
DAY = future_monday()


@pytest.fixture
def blr() -> Any:
    return BranchFactory(
        code="BLR", name="Bengaluru Central", time_zone="Asia/Kolkata", cancellation_window_minutes=120
    )


@pytest.fixture
def reception(page: Any, django_user_model: Any, settings: Any, blr: Any) -> Any:
    """The page logged in as a receptionist of BLR, at 1366x768."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    settings.ADMIN_REQUIRE_2FA = True
    user = django_user_model.objects.create_user("frontdesk", "frontdesk@clinic.invalid", PASSWORD, is_staff=True)
    staff_of(user, blr)
    user.groups.add(Group.objects.get(name="receptionist"))
    device = TOTPDevice.objects.create(user=user, name="phone", confirmed=True)
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "frontdesk")
    page.fill("#id_password", PASSWORD)
    page.fill("#id_otp_token", current_totp_code(device))
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return page


@pytest.fixture
def doctor(blr: Any) -> Any:
    doctor = DoctorFactory(name="Dr. Ananya Rao", branches=[blr], default_slot_minutes=15)
    WeeklySession.objects.create(doctor=doctor, branch=blr, weekday=0, start=time(9, 0), end=time(10, 0))
    return doctor


def test_find_a_patient_then_register_her_twin_after_confirming(reception, blr):
    page = reception
    sister = PatientFactory(
        first_name="Asha", last_name="Kulkarni", phone="+919876543210", date_of_birth=date(1990, 4, 12),
        registration_branch=blr,
    )  # fmt: skip

    page.click("#reception-links >> text=Find a patient")
    page.fill("#find_q", "Asha Kulkarny")
    page.click("#find_form input[type=submit]")
    page.wait_for_url("**/find/?q=Asha+Kulkarny")
    row = page.locator("#find_results tbody tr").first
    assert row.locator("td").all_inner_texts()[:5] == [
        "Asha Kulkarni", sister.patient_id, f"{sister.age_on(timezone.localdate())} y · Female", "+91******3210",
        "BLR · Bengaluru Central",
    ]  # fmt: skip

    page.click("#register_link")
    page.fill("#id_first_name", "Usha")
    page.fill("#id_last_name", "Kulkarni")
    page.fill("#id_date_of_birth", "1990-04-12")
    page.select_option("#id_gender", "female")
    page.fill("#id_phone", "98765 43210")
    assert page.locator("#id_registration_branch option:checked").inner_text() == str(blr)
    page.click("input[name=_save]")

    page.wait_for_selector(f"text={sister.patient_id} already has this phone number and date of birth.")
    assert Patient.objects.count() == 1
    page.check("#id_distinct_person")
    page.click("input[name=_save]")

    page.wait_for_selector("text=was added successfully")
    twin = Patient.objects.exclude(pk=sister.pk).get()
    assert (twin.name, twin.phone, twin.date_of_birth, twin.registration_branch) == (
        "Usha Kulkarni", "+919876543210", date(1990, 4, 12), blr,
    )  # fmt: skip


def test_book_from_the_slot_picker(reception, blr, doctor):
    page = reception
    patient = PatientFactory(first_name="Priya", last_name="Sharma", registration_branch=blr)
    taken = timezone.datetime.combine(DAY, time(9, 15), tzinfo=blr.zone)
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=taken, slot_end=taken + timedelta(minutes=15))

    page.goto(f"/admin/patients/patient/find/?q={patient.patient_id}")
    page.click("#find_results >> text=Book appointment")
    page.wait_for_url("**/appointment/book/?patient=*")
    assert page.input_value("#id_patient") == patient.patient_id
    page.select_option("#id_doctor", label="Dr. Ananya Rao")
    page.fill("#id_date", DAY.isoformat())
    page.click("#booking_form input[type=submit]")
    page.wait_for_selector("#slots button")
    assert page.locator("#slots button").all_inner_texts() == ["09:00-09:15", "09:30-09:45", "09:45-10:00"]
    page.click("#slots >> text=09:30-09:45")

    page.wait_for_selector(
        f"text=Booked Priya Sharma with Dr. Ananya Rao at BLR on {DAY:%d %b %Y} 09:30 IST: token #1."
    )
    booked = Appointment.objects.get(patient=patient)
    assert (booked.slot_start, booked.status, booked.token_number) == (
        timezone.datetime.combine(DAY, time(9, 30), tzinfo=blr.zone), "booked", 1,
    )  # fmt: skip
    assert list(booked.changes.values_list("kind", "actor")) == [("booked", "staff:frontdesk")]


def test_check_in_from_todays_queue_and_the_list_fits_the_screen(reception, blr, doctor):
    page = reception
    now = timezone.localtime(timezone.now(), blr.zone)
    start = max(now - timedelta(minutes=5), now.replace(hour=0, minute=1, second=0, microsecond=0))
    patient = PatientFactory(first_name="Rahul", last_name="Verma", registration_branch=blr)
    due = AppointmentFactory(
        doctor=doctor, branch=blr, patient=patient, slot_start=start, slot_end=start + timedelta(minutes=15),
        token_number=3,
    )  # fmt: skip

    page.goto("/admin/appointments/appointment/")
    # At 1366 px every column, the status included, is on screen: the list does not overflow its box.
    assert page.evaluate("(e => e.scrollWidth <= e.clientWidth)(document.querySelector('#changelist .results'))")
    status = page.locator("#result_list thead th.column-status").bounding_box()
    assert status is not None
    assert status["x"] + status["width"] <= 1366
    page.click("#queue_link")
    page.wait_for_selector("#queue tbody tr")
    row = page.locator("#queue tbody tr").first
    assert row.locator("td").all_inner_texts()[:5] == [
        "#3", str(patient), "Dr. Ananya Rao", f"{start:%H:%M}", "Booked",
    ]  # fmt: skip
    row.locator("input[value='Check in']").click()

    page.wait_for_selector("text=Rahul Verma (token #3): Checked In.")
    row = page.locator("#queue tbody tr").first
    assert row.locator("td").nth(4).inner_text() == "Checked In"
    assert row.locator("td").nth(5).inner_text() == "0 min since check-in"
    due.refresh_from_db()
    assert (due.status, due.version) == ("checked_in", 2)
    assert list(due.changes.values_list("kind", "actor")) == [("checked_in", "staff:frontdesk")]


def test_reschedule_then_cancel_from_the_appointment_page(reception, blr, doctor):
    page = reception
    start = timezone.datetime.combine(DAY, time(9, 0), tzinfo=blr.zone)
    appointment = AppointmentFactory(
        doctor=doctor, branch=blr, slot_start=start, slot_end=start + timedelta(minutes=15),
        patient=PatientFactory(first_name="Meera", last_name="Iyer", registration_branch=blr),
    )  # fmt: skip

    page.goto(f"/admin/appointments/appointment/{appointment.pk}/change/")
    page.click(".object-tools >> text=Reschedule")
    page.fill("#id_reason", "Patient asked for later")
    page.click("#slots >> text=09:45-10:00")
    page.wait_for_selector(f"text=Rescheduled to {DAY:%d %b %Y} 09:45 IST")
    appointment.refresh_from_db()
    assert appointment.slot_start == timezone.datetime.combine(DAY, time(9, 45), tzinfo=blr.zone)
    assert appointment.changes.get(kind="rescheduled").reason == "Patient asked for later"

    page.click(".object-tools >> text=Cancel appointment")
    page.fill("#id_reason", "Doctor unavailable")
    page.click("#cancel_form input[type=submit]")
    page.wait_for_selector("text=Cancelled")
    appointment.refresh_from_db()
    assert (appointment.status, appointment.cancellation_reason, appointment.version) == (
        "cancelled", "Doctor unavailable", 3,
    )  # fmt: skip
    assert page.locator(".object-tools >> text=Reschedule").count() == 0
