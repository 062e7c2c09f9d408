"""Staff actions on appointments in the admin (through the same services as the API; a staff cancellation
ignores the window), the notification admin pages, and the scheduling part of seed_demo."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from appointments.models import Appointment, AppointmentChange, BranchHoliday, DoctorLeave, WeeklySession
from integrations.models import NotificationSettings
from tests.appointments.factories import AppointmentFactory
from tests.factories import BranchFactory

pytestmark = pytest.mark.django_db
CHANGELIST = "/admin/appointments/appointment/"


@pytest.fixture
def soon():
    """A booked appointment starting in 30 minutes at a branch with a 120-minute cancellation window:
    the API may no longer cancel it."""
    branch = BranchFactory(cancellation_window_minutes=120)
    start = timezone.now() + timedelta(minutes=30)
    return AppointmentFactory(branch=branch, slot_start=start, slot_end=start + timedelta(minutes=15))


@pytest.fixture
def due_today():
    """A booked appointment on the branch's local today, starting at most 10 minutes ago: check-in is allowed
    on the local day only, so `soon` (30 minutes ahead) cannot be checked in during the last half hour of the
    day."""
    branch = BranchFactory(cancellation_window_minutes=120)
    now = timezone.localtime(timezone.now(), branch.zone)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    start = max(now - timedelta(minutes=10), midnight + timedelta(minutes=1))
    return AppointmentFactory(branch=branch, slot_start=start, slot_end=start + timedelta(minutes=15))


def act(admin_client, action: str, *appointments: Appointment, **extra: str):
    data = {"action": action, "_selected_action": [str(a.pk) for a in appointments], **extra}
    return admin_client.post(CHANGELIST, data, follow=True)


def test_staff_cancel_asks_for_a_reason_first_and_changes_nothing_until_confirmed(admin_client, soon):
    response = act(admin_client, "cancel", soon)

    assert response.status_code == 200
    assert response.templates[0].name == "admin/reason_action.html"
    assert b"Staff cancellations ignore the branch" in response.content
    soon.refresh_from_db()
    assert (soon.status, soon.version) == ("booked", 1)


def test_staff_cancel_inside_the_window_cancels_with_the_reason_and_records_the_staff_member(admin_client, soon):
    response = act(admin_client, "cancel", soon, confirm="yes", reason="Doctor called in sick")

    assert response.status_code == 200
    assert b"1 appointment(s) updated." in response.content
    soon.refresh_from_db()
    assert (soon.status, soon.cancellation_reason, soon.version) == ("cancelled", "Doctor called in sick", 2)
    change = AppointmentChange.objects.get(appointment=soon, kind="cancelled")
    assert (change.actor, change.reason, change.version) == ("staff:admin", "Doctor called in sick", 2)


def test_staff_cancel_without_a_reason_shows_the_form_again(admin_client, soon):
    response = act(admin_client, "cancel", soon, confirm="yes", reason="  ")

    assert b"This field is required." in response.content
    soon.refresh_from_db()
    assert soon.status == "booked"


def test_check_in_then_complete_from_the_admin_adds_a_visit(admin_client, due_today):
    act(admin_client, "check_in", due_today)
    act(admin_client, "complete", due_today)

    due_today.refresh_from_db()
    assert (due_today.status, due_today.version) == ("completed", 3)
    assert due_today.visit is not None
    assert due_today.visit.patient_id == due_today.patient_id
    assert list(due_today.changes.values_list("kind", "actor")) == [
        ("checked_in", "staff:admin"),
        ("completed", "staff:admin"),
    ]


def test_a_refused_action_names_the_appointment_and_the_reason_and_changes_nothing(admin_client):
    # Written directly: an appointment that started five minutes ago (no-show only once it has started).
    start = timezone.now() - timedelta(minutes=5)
    started = AppointmentFactory(slot_start=start, slot_end=start + timedelta(minutes=15))
    done = AppointmentFactory(status=Appointment.Status.COMPLETED)
    response = act(admin_client, "mark_no_show", started, done)

    assert b"1 appointment(s) updated." in response.content
    assert b"Cannot no show an appointment that is completed; it must be booked." in response.content
    done.refresh_from_db()
    assert (done.status, done.version) == ("completed", 1)


def test_appointments_cannot_be_added_or_deleted_in_the_admin(admin_client, soon):
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    assert admin_client.get(f"{CHANGELIST}{soon.pk}/delete/").status_code == 403
    page = admin_client.get(f"{CHANGELIST}{soon.pk}/change/")
    assert page.status_code == 200
    assert b"Appointment changes" in page.content


def test_the_notification_settings_list_opens_the_single_settings_page(admin_client):
    response = admin_client.get("/admin/integrations/notificationsettings/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/integrations/notificationsettings/1/change/"
    assert admin_client.get(response["Location"]).status_code == 200
    assert NotificationSettings.objects.count() == 1


def test_notification_settings_are_saved_from_the_admin(admin_client):
    branch = BranchFactory()
    response = admin_client.post(
        "/admin/integrations/notificationsettings/1/change/",
        {
            "sms_enabled": "on",
            "event_kinds": ["appointment.booked", "appointment.cancelled"],
            "branches": [str(branch.pk)],
        },
    )
    assert response.status_code == 302
    config = NotificationSettings.load()
    assert (config.sms_enabled, config.email_enabled, config.event_kinds) == (
        True,
        False,
        ["appointment.booked", "appointment.cancelled"],
    )
    assert list(config.branches.all()) == [branch]


def test_the_notification_log_is_read_only(admin_client):
    assert admin_client.get("/admin/integrations/notificationattempt/").status_code == 200
    assert admin_client.get("/admin/integrations/notificationattempt/add/").status_code == 403


def test_seed_demo_creates_schedules_closures_and_appointments_in_every_status():
    manifest = json.loads(_run_seed())

    statuses = {a["status"] for a in manifest["appointments"]}
    # Every status, but a no-show only once a slot of the day has begun (not in the first minutes after midnight).
    assert statuses - {"no_show"} == {"booked", "checked_in", "completed", "cancelled"}
    tokens: dict[tuple[Any, Any], list[int]] = {}
    for doctor, day, token in Appointment.objects.values_list("doctor_id", "local_date", "token_number"):
        tokens.setdefault((doctor, day), []).append(token)
    # Numbered as the booking service numbers them: from 1, per doctor and local day, without gaps.
    assert all(sorted(numbers) == list(range(1, len(numbers) + 1)) for numbers in tokens.values())
    for doctor in manifest["doctors"]:
        weekdays = set(WeeklySession.objects.filter(doctor_id=doctor["id"]).values_list("weekday", flat=True))
        assert weekdays == set(range(7)), doctor["name"]
    assert DoctorLeave.objects.exists()
    assert BranchHoliday.objects.exists()
    assert all(completed.visit is not None for completed in Appointment.objects.filter(status="completed"))

    count = Appointment.objects.count()
    _run_seed()
    assert Appointment.objects.count() == count


def _run_seed() -> str:
    out = StringIO()
    call_command("seed_demo", "--json", stdout=out)
    return out.getvalue()


def test_a_refused_check_in_names_the_slot_in_the_branch_time_zone(admin_client):
    # A 9:00 slot in Bengaluru two days ahead: check-in is refused (not its day), and the refusal names the
    # appointment at 09:00 IST, never 03:30 (UTC).
    branch = BranchFactory(time_zone="Asia/Kolkata")
    day = timezone.localtime(timezone.now(), branch.zone).date() + timedelta(days=2)
    start = timezone.make_aware(timezone.datetime(day.year, day.month, day.day, 9, 0), branch.zone)
    appointment = AppointmentFactory(branch=branch, slot_start=start, slot_end=start + timedelta(minutes=15))

    response = act(admin_client, "check_in", appointment)

    html = response.content.decode()
    assert (
        f"{day:%Y-%m-%d} 09:00 IST #{appointment.token_number}: An appointment can be checked in only on its day"
        in html
    )
    assert "03:30" not in html
    appointment.refresh_from_db()
    assert (appointment.status, appointment.version) == ("booked", 1)
