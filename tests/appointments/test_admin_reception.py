"""Reception in the admin, appointment side: booking from the slot picker (the API's free cells, in the
branch's time zone, booked by appointment_book), rescheduling, cancelling, status changes from the
appointment page and today's queue; each scoped to the staff member's branches and permissions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from appointments.models import Appointment, AppointmentChange, WeeklySession
from appointments.services import appointment_book, appointment_reschedule
from clinic.errors import DomainError
from integrations.models import AuditLogEntry
from tests.appointments.factories import AppointmentFactory, future_monday
from tests.factories import BranchFactory, DoctorFactory, staff_of
from tests.helpers import REQUEST_BOOKKEEPING, row_counts
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
ROOT = "/admin/appointments/appointment/"
BOOK = f"{ROOT}book/"
QUEUE = f"{ROOT}queue/"
DAY = future_monday()
BOOKKEEPING = REQUEST_BOOKKEEPING | {"django_otp.TOTPDevice", "sessions.Session", "axes.AccessLog"}


def staff_client(django_user_model: Any, username: str, *branches: Any, role: str | None = "receptionist") -> Client:
    user = django_user_model.objects.create_user(username, password="x", is_staff=True)
    staff_of(user, *branches)
    if role:
        user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


def local(day: Any, hhmm: str, branch: Any) -> datetime:
    return datetime.combine(day, time.fromisoformat(hhmm), tzinfo=branch.zone)


def counts() -> dict[str, int]:
    return row_counts(exclude=BOOKKEEPING)


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


@pytest.fixture
def blr() -> Any:
    return BranchFactory(
        code="BLR", name="Bengaluru Central", time_zone="Asia/Kolkata", cancellation_window_minutes=120
    )


@pytest.fixture
def mum() -> Any:
    return BranchFactory(code="MUM", name="Mumbai Andheri", time_zone="Asia/Kolkata")


@pytest.fixture
def doctor(blr: Any) -> Any:
    doctor = DoctorFactory(name="Dr. Ananya Rao", branches=[blr], default_slot_minutes=15)
    WeeklySession.objects.create(doctor=doctor, branch=blr, weekday=0, start=time(9, 0), end=time(10, 0))
    return doctor


@pytest.fixture
def patient(blr: Any) -> Any:
    return PatientFactory(first_name="Priya", last_name="Sharma", registration_branch=blr)


@pytest.fixture
def reception(django_user_model: Any, blr: Any) -> Client:
    return staff_client(django_user_model, "frontdesk", blr)


@pytest.fixture
def elsewhere(django_user_model: Any, mum: Any) -> Client:
    """A receptionist of another branch."""
    return staff_client(django_user_model, "mumbai", mum)


def book_query(patient: Any, doctor: Any, branch: Any | None = None) -> dict[str, str]:
    return {
        "patient": patient.patient_id,
        "doctor": str(doctor.pk),
        "branch": str(branch.pk) if branch else "",
        "date": DAY.isoformat(),
        "visit_type": "consultation",
    }


def slot_buttons(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<button type="submit" name="slot" value="([^"]+)" class="button slot">([^<]+)</button>', html)


# --- Booking from the slot picker -------------------------------------------------------------------------


def test_the_picker_shows_the_apis_free_slots_in_the_branch_time_zone(reception, doctor, patient, blr):
    taken = local(DAY, "09:15", blr)
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=taken, slot_end=taken + timedelta(minutes=15))

    response = reception.get(BOOK, book_query(patient, doctor))

    html = response.content.decode()
    assert response.status_code == 200
    assert slot_buttons(html) == [
        (local(DAY, "09:00", blr).astimezone(UTC).isoformat(), "09:00-09:15"),
        (local(DAY, "09:30", blr).astimezone(UTC).isoformat(), "09:30-09:45"),
        (local(DAY, "09:45", blr).astimezone(UTC).isoformat(), "09:45-10:00"),
    ]
    assert f"Free slots for Priya Sharma ({patient.patient_id}) with Dr. Ananya Rao" in html
    assert AuditLogEntry.objects.get().patient_ids == [patient.pk]


def test_picking_a_slot_books_it_through_the_booking_service(reception, doctor, patient, blr):
    start = local(DAY, "09:30", blr)

    response = reception.post(BOOK, {**book_query(patient, doctor, blr), "slot": start.isoformat()}, follow=True)

    booked = Appointment.objects.get()
    assert response.redirect_chain == [(f"{ROOT}{booked.pk}/change/", 302)]
    assert (booked.patient, booked.doctor, booked.branch, booked.slot_start, booked.slot_end) == (
        patient, doctor, blr, start, start + timedelta(minutes=15),
    )  # fmt: skip
    assert (booked.status, booked.token_number, booked.visit_type) == ("booked", 1, "consultation")
    assert list(booked.changes.values_list("kind", "actor")) == [("booked", "staff:frontdesk")]
    assert messages_of(response) == [
        f"Booked Priya Sharma with Dr. Ananya Rao at BLR on {DAY:%d %b %Y} 09:30 IST: token #1."
    ]


def test_a_slot_taken_meanwhile_is_refused_with_a_message_and_nothing_is_booked(reception, doctor, patient, blr):
    start = local(DAY, "09:30", blr)
    appointment_book(
        patient=PatientFactory(registration_branch=blr), doctor=doctor, branch=blr, slot_start=start,
        slot_end=start + timedelta(minutes=15),
    )  # fmt: skip
    before = counts()

    response = reception.post(BOOK, {**book_query(patient, doctor, blr), "slot": start.isoformat()})

    assert response.status_code == 200
    assert messages_of(response) == [
        "That interval is not a free slot of this doctor at this branch. Nothing was booked; pick another slot."
    ]
    assert "09:30-09:45" not in response.content.decode()
    assert counts() == before


def test_another_branchs_doctor_and_patient_cannot_be_picked(elsewhere, doctor, patient, mum):
    before = counts()

    page = elsewhere.get(BOOK, book_query(patient, doctor))
    posted = elsewhere.post(BOOK, {**book_query(patient, doctor), "slot": local(DAY, "09:30", mum).isoformat()})

    html = page.content.decode()
    assert f"No patient {patient.patient_id} at your branches." in html
    assert "Select a valid choice." in html
    assert slot_buttons(html) == []
    assert "Dr. Ananya Rao" not in html
    assert posted.status_code == 200
    assert counts() == before


def test_booking_needs_the_add_appointment_permission(django_user_model, doctor, patient, blr):
    lab = staff_client(django_user_model, "lab", blr, role="lab technician")
    before = counts()

    assert lab.get(BOOK).status_code == 403
    assert (
        lab.post(BOOK, {**book_query(patient, doctor), "slot": local(DAY, "09:30", blr).isoformat()}).status_code == 403
    )
    assert counts() == before


# --- Reschedule, cancel and status changes from the appointment page ------------------------------------


@pytest.fixture
def booked(doctor, patient, blr) -> Appointment:
    start = local(DAY, "09:00", blr)
    return appointment_book(
        patient=patient, doctor=doctor, branch=blr, slot_start=start, slot_end=start + timedelta(minutes=15)
    )


def test_the_appointment_page_offers_check_in_reschedule_and_cancel(reception, booked):
    html = reception.get(f"{ROOT}{booked.pk}/change/").content.decode()

    assert f'action="{ROOT}{booked.pk}/status/check-in/"' in html
    assert f'href="{ROOT}{booked.pk}/reschedule/">Reschedule</a>' in html
    assert f'href="{ROOT}{booked.pk}/cancel/">Cancel appointment</a>' in html


def test_reschedule_lists_the_days_free_slots_and_moves_the_appointment(reception, booked, blr):
    url = f"{ROOT}{booked.pk}/reschedule/"
    page = reception.get(url, {"date": DAY.isoformat()}).content.decode()
    target = local(DAY, "09:45", blr)

    response = reception.post(url, {"date": DAY.isoformat(), "reason": "Patient asked", "slot": target.isoformat()})

    assert [label for _, label in slot_buttons(page)] == ["09:00-09:15", "09:15-09:30", "09:30-09:45", "09:45-10:00"]
    assert response.status_code == 302
    booked.refresh_from_db()
    assert (booked.slot_start, booked.token_number, booked.version) == (target, 1, 2)
    change = booked.changes.get(kind="rescheduled")
    assert (change.actor, change.reason, change.previous_slot_start) == (
        "staff:frontdesk", "Patient asked", local(DAY, "09:00", blr),
    )  # fmt: skip


def test_staff_reschedule_inside_the_cancellation_window_the_api_refuses(reception, booked, blr):
    # A window of 30 days puts the whole of DAY inside it: an API client may neither cancel nor move.
    blr.cancellation_window_minutes = 30 * 24 * 60
    blr.save(update_fields=["cancellation_window_minutes"])
    target = local(DAY, "09:45", blr)
    with pytest.raises(DomainError, match="only until 43200 minutes before"):
        appointment_reschedule(appointment=booked, slot_start=target, slot_end=target + timedelta(minutes=15))
    booked.refresh_from_db()
    assert booked.version == 1

    response = reception.post(
        f"{ROOT}{booked.pk}/reschedule/", {"date": DAY.isoformat(), "reason": "Called", "slot": target.isoformat()}
    )

    assert response.status_code == 302
    booked.refresh_from_db()
    assert (booked.slot_start, booked.version) == (target, 2)
    assert booked.changes.get(kind="rescheduled").actor == "staff:frontdesk"


def test_reschedule_to_a_taken_slot_changes_nothing(reception, booked, doctor, blr):
    taken = local(DAY, "09:30", blr)
    appointment_book(
        patient=PatientFactory(registration_branch=blr), doctor=doctor, branch=blr, slot_start=taken,
        slot_end=taken + timedelta(minutes=15),
    )  # fmt: skip
    before = counts()

    response = reception.post(f"{ROOT}{booked.pk}/reschedule/", {"date": DAY.isoformat(), "slot": taken.isoformat()})

    assert messages_of(response) == [
        "That interval is not a free slot of this doctor at this branch. The appointment was not moved."
    ]
    booked.refresh_from_db()
    assert (booked.slot_start, booked.version) == (local(DAY, "09:00", blr), 1)
    assert counts() == before


def test_cancel_from_the_appointment_page_needs_a_reason(reception, booked):
    url = f"{ROOT}{booked.pk}/cancel/"
    blank = reception.post(url, {"reason": " "})
    booked.refresh_from_db()
    assert (blank.status_code, booked.status) == (200, "booked")
    assert "This field is required." in blank.content.decode()

    done = reception.post(url, {"reason": "Doctor unavailable"})

    assert done.status_code == 302
    booked.refresh_from_db()
    assert (booked.status, booked.cancellation_reason, booked.version) == ("cancelled", "Doctor unavailable", 2)
    assert booked.changes.get(kind="cancelled").actor == "staff:frontdesk"


def test_another_branchs_staff_cannot_reach_an_appointment_by_url(elsewhere, booked):
    before = counts()

    for path in ("reschedule/", "cancel/", "change/"):
        assert elsewhere.get(f"{ROOT}{booked.pk}/{path}").status_code in (302, 404), path
    assert elsewhere.post(f"{ROOT}{booked.pk}/cancel/", {"reason": "x"}).status_code == 404
    assert elsewhere.post(f"{ROOT}{booked.pk}/status/check-in/").status_code == 404
    booked.refresh_from_db()
    assert (booked.status, booked.version) == ("booked", 1)
    assert counts() == before


def test_a_refused_status_change_says_why_and_changes_nothing(reception, booked):
    response = reception.post(f"{ROOT}{booked.pk}/status/check-in/", follow=True)

    assert messages_of(response) == [
        f"{booked}: An appointment can be checked in only on its day, {DAY}, at its branch."
    ]
    booked.refresh_from_db()
    assert (booked.status, booked.version) == ("booked", 1)


def test_status_changes_are_post_only_and_unknown_ones_are_not_found(reception, booked):
    assert reception.get(f"{ROOT}{booked.pk}/status/check-in/").status_code == 405
    assert reception.post(f"{ROOT}{booked.pk}/status/delete/").status_code == 404
    booked.refresh_from_db()
    assert booked.version == 1


# --- Today's queue ----------------------------------------------------------------------------------------


@pytest.fixture
def today(blr, doctor):
    """Today's appointments at BLR, each minutes from now but on the local day: one checked in 12 minutes
    ago, one booked whose slot began 5 minutes ago, one due later, one cancelled (not in the queue)."""
    now = timezone.localtime(timezone.now(), blr.zone).replace(second=0, microsecond=0)
    midnight = now.replace(hour=0, minute=0)
    base = min(max(now, midnight + timedelta(minutes=30)), midnight + timedelta(hours=23, minutes=20))

    def make(start: datetime, token: int, status: str = "booked", **extra: Any) -> Appointment:
        return AppointmentFactory(
            doctor=doctor, branch=blr, slot_start=start, slot_end=start + timedelta(minutes=15), token_number=token,
            status=status, patient=PatientFactory(first_name=f"P{token}", last_name="Queue", registration_branch=blr),
            **extra,
        )  # fmt: skip

    return {
        "waiting": make(
            base - timedelta(minutes=20), 1, "checked_in", checked_in_at=timezone.now() - timedelta(minutes=12)
        ),
        "late": make(base - timedelta(minutes=5), 2),
        "later": make(base + timedelta(minutes=30), 3),
        "cancelled": make(base + timedelta(minutes=15), 4, "cancelled"),
        "now": now,
    }


def queue_rows(html: str) -> list[list[str]]:
    body = html.split('id="queue"', 1)[1].split("</table>", 1)[0].split("<tbody>", 1)[1]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)
    cells = [re.findall(r"<td>(.*?)</td>", row, re.S) for row in rows]
    return [[re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", c)).strip() for c in row] for row in cells]


def test_the_queue_lists_today_with_waiting_times_and_buttons(reception, today, blr, mum):
    AppointmentFactory(branch=mum, slot_start=today["late"].slot_start, slot_end=today["late"].slot_end)

    response = reception.get(QUEUE)
    now = timezone.now()

    html = response.content.decode()
    waiting, late, later = today["waiting"], today["late"], today["later"]

    def wait(appointment: Appointment) -> str:
        # Near midnight the fixture's slots are shifted to stay on the local day, so "late" may not have begun
        # yet and "later" may have: the expected words follow the clock, as the page's do.
        minutes = int(abs((now - appointment.slot_start).total_seconds()) // 60)
        return f"{minutes} min since the slot" if appointment.slot_start <= now else f"due in {minutes} min"

    slot = [f"{timezone.localtime(a.slot_start, blr.zone):%H:%M}" for a in (waiting, late, later)]
    assert queue_rows(html) == [
        ["#1", str(waiting.patient), "Dr. Ananya Rao", slot[0], "Checked In", "12 min since check-in", ""],
        ["#2", str(late.patient), "Dr. Ananya Rao", slot[1], "Booked", wait(late), ""],
        ["#3", str(later.patient), "Dr. Ananya Rao", slot[2], "Booked", wait(later), ""],
    ]
    assert f'action="{ROOT}{waiting.pk}/status/complete/"' in html
    assert f'action="{ROOT}{late.pk}/status/check-in/"' in html
    # No-show is offered once the slot has begun.
    assert (f'action="{ROOT}{late.pk}/status/no-show/"' in html) is (late.slot_start <= now)
    assert (f'action="{ROOT}{later.pk}/status/no-show/"' in html) is (later.slot_start <= now)
    assert AuditLogEntry.objects.get().patient_ids == [waiting.patient_id, late.patient_id, later.patient_id]


def test_checking_in_from_the_queue_returns_to_the_queue(reception, today):
    late = today["late"]

    response = reception.post(f"{ROOT}{late.pk}/status/check-in/", {"next": QUEUE}, follow=True)

    assert response.redirect_chain == [(QUEUE, 302)]
    late.refresh_from_db()
    assert (late.status, late.version) == ("checked_in", 2)
    assert AppointmentChange.objects.get(appointment=late).actor == "staff:frontdesk"
    assert messages_of(response) == ["P2 Queue (token #2): Checked In."]


def test_another_branchs_queue_is_never_shown(elsewhere, today, blr):
    html = elsewhere.get(QUEUE, {"branch": str(blr.pk)}).content.decode()

    assert "Queue" not in html.split('id="queue_heading"', 1)[1]
    assert "No appointments today." in html


def test_the_queue_needs_the_view_permission(django_user_model, blr, today):
    assert staff_client(django_user_model, "nobody", blr, role=None).get(QUEUE).status_code == 403


def test_staff_of_several_branches_see_the_branch_column(django_user_model, today, blr, mum):
    both = staff_client(django_user_model, "both", blr, mum)

    html = both.get(ROOT).content.decode()

    head = html.split('id="result_list"', 1)[1].split("</thead>", 1)[0]
    assert re.findall(r'<th scope="col"[^>]*>.*?<a [^>]*>([^<]+)</a>', head, re.S)[-1].strip() == "Branch"
    assert '<td class="field-branch_code">BLR</td>' in html


def test_the_appointment_list_fits_with_the_status_on_screen(reception, today):
    html = reception.get(ROOT).content.decode()

    head = html.split('id="result_list"', 1)[1].split("</thead>", 1)[0]
    headers = re.findall(r'<th scope="col"[^>]*>.*?<a [^>]*>([^<]+)</a>', head, re.S)
    assert [h.strip() for h in headers] == ["Slot", "Token", "Status", "Patient", "Doctor"]  # one branch: no column
    waiting = today["waiting"]
    local = timezone.localtime(waiting.slot_start, waiting.branch.zone)
    assert f'{local:%d %b %Y, %H:%M} IST</a></th><td class="field-token">#1</td>' in html
    assert '<td class="field-patient_name">P1 Queue</td>' in html
    assert f'href="{QUEUE}"' in html
    assert f'href="{BOOK}"' in html


def test_changing_an_appointment_needs_the_change_permission(django_user_model, booked, blr):
    lab = staff_client(django_user_model, "lab", blr, role="lab technician")
    before = counts()

    assert lab.get(f"{ROOT}{booked.pk}/reschedule/").status_code == 403
    assert lab.post(f"{ROOT}{booked.pk}/cancel/", {"reason": "x"}).status_code == 403
    assert lab.post(f"{ROOT}{booked.pk}/status/check-in/").status_code == 403
    booked.refresh_from_db()
    assert (booked.status, booked.version) == ("booked", 1)
    assert counts() == before


def test_a_doctor_of_two_branches_needs_the_branch_and_nothing_is_booked_without_it(
    reception, patient, blr, django_user_model
):
    other = BranchFactory(code="HSR", name="HSR Layout")
    staff_of(django_user_model.objects.get(username="frontdesk"), blr, other)
    doctor = DoctorFactory(name="Dr. Two Places", branches=[blr, other])
    WeeklySession.objects.create(doctor=doctor, branch=blr, weekday=0, start=time(9, 0), end=time(10, 0))
    before = counts()

    response = reception.post(BOOK, {**book_query(patient, doctor), "slot": local(DAY, "09:30", blr).isoformat()})

    assert "Required: this doctor consults at more than one branch." in response.content.decode()
    assert counts() == before


def test_bad_input_is_a_message_or_a_form_error_and_books_nothing(reception, doctor, patient, blr):
    before = counts()

    garbage_slot = reception.post(BOOK, {**book_query(patient, doctor), "slot": "tomorrow at nine"})
    bad_date = reception.get(BOOK, {**book_query(patient, doctor), "date": "2026-02-30"})
    odd_queue = reception.get(QUEUE, {"branch": "not-a-branch", "doctor": "\x01"})

    assert messages_of(garbage_slot) == ["Pick one of the free slots."]
    assert "Enter a valid date." in bad_date.content.decode()
    assert slot_buttons(bad_date.content.decode()) == []
    assert odd_queue.status_code in (200, 400)
    assert counts() == before
