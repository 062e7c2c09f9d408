"""manage.py reset_token_sequence: --start N moves the next token, --renumber renumbers the active
appointments of the day 1..k; unsafe resets are refused with a clear message and change nothing."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from appointments import services
from appointments.models import Appointment, AppointmentChange, TokenCounter
from tests.appointments.test_booking import DAY, at, branch, doctor, patient
from tests.factories import BranchFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
__all__ = ["branch", "doctor", "patient"]  # fixtures shared with the booking tests


def book(doctor, branch, hhmm: str, patient=None) -> Appointment:
    start = at(DAY, hhmm)
    return services.appointment_book(
        patient=patient or PatientFactory(registration_branch=branch),
        doctor=doctor,
        branch=branch,
        slot_start=start,
        slot_end=start + timedelta(minutes=15),
    )


def reset(doctor, *args: str) -> str:
    out = StringIO()
    call_command("reset_token_sequence", "--doctor", str(doctor.id), "--date", DAY.isoformat(), *args, stdout=out)
    return out.getvalue()


def day_state(doctor) -> tuple[list[tuple[str, int, int]], int | None]:
    tokens = [
        (a.slot_start.astimezone(a.branch.zone).strftime("%H:%M"), a.token_number, a.version)
        for a in Appointment.objects.filter(doctor=doctor, local_date=DAY).order_by("slot_start")
    ]
    counter = TokenCounter.objects.filter(doctor=doctor, local_date=DAY).values_list("last_number", flat=True).first()
    return tokens, counter


def test_start_makes_the_next_booking_take_that_number(doctor, branch):
    book(doctor, branch, "09:00")
    out = reset(doctor, "--start", "10")

    assert out == f"Dr. Ananya Rao, {DAY}:\n  Changed: next token 2 -> 10\n"
    assert book(doctor, branch, "09:15").token_number == 10
    assert book(doctor, branch, "09:30").token_number == 11


def test_start_on_a_day_without_bookings_creates_the_counter(doctor, branch):
    reset(doctor, "--start", "5")

    assert day_state(doctor) == ([], 4)
    assert book(doctor, branch, "09:00").token_number == 5


def test_start_below_a_number_in_use_is_refused_and_changes_nothing(doctor, branch):
    for hhmm in ("09:00", "09:15", "09:30"):
        book(doctor, branch, hhmm)
    services.appointment_cancel(appointment=Appointment.objects.get(token_number=3), reason="x", enforce_window=False)
    before = day_state(doctor)

    with pytest.raises(CommandError) as refused:
        reset(doctor, "--start", "2")

    assert str(refused.value) == (
        "Refused: token(s) 2, 3 are already held that day; the next token must be above 3 or the numbers "
        "would be handed out twice."
    )
    assert day_state(doctor) == before


def test_start_must_be_positive(doctor):
    with pytest.raises(CommandError, match=r"--start must be 1 or more\."):
        reset(doctor, "--start", "0")


def test_renumber_closes_gaps_in_slot_order_and_sets_the_next_number(doctor, branch):
    book(doctor, branch, "09:30")  # token 1
    book(doctor, branch, "09:00")  # token 2
    reset(doctor, "--start", "7")
    book(doctor, branch, "09:15")  # token 7

    out = reset(doctor, "--renumber")

    first, second, third = Appointment.objects.filter(doctor=doctor).order_by("slot_start")
    assert out == (
        f"Dr. Ananya Rao, {DAY}:\n"
        f"  Changed: token 2 -> 1 ({first.patient.patient_id}, 09:00, booked)\n"
        f"  Changed: token 7 -> 2 ({second.patient.patient_id}, 09:15, booked)\n"
        f"  Changed: token 1 -> 3 ({third.patient.patient_id}, 09:30, booked)\n"
        "  Changed: next token 8 -> 4\n"
    )
    assert day_state(doctor) == ([("09:00", 1, 2), ("09:15", 2, 2), ("09:30", 3, 2)], 3)
    assert list(
        AppointmentChange.objects.filter(kind="token_renumbered")
        .order_by("previous_token_number")
        .values_list("previous_token_number", "version", "actor")
    ) == [
        (1, 2, "command:reset_token_sequence"),
        (2, 2, "command:reset_token_sequence"),
        (7, 2, "command:reset_token_sequence"),
    ]
    assert book(doctor, branch, "09:45").token_number == 4


def test_renumber_of_a_day_already_in_order_changes_nothing(doctor, branch):
    book(doctor, branch, "09:00")
    book(doctor, branch, "09:15")
    before = day_state(doctor)

    assert reset(doctor, "--renumber") == f"Dr. Ananya Rao, {DAY}:\n  Nothing to change: the next token is already 3.\n"
    assert day_state(doctor) == before


def test_renumber_is_refused_when_a_cancelled_appointment_keeps_its_number(doctor, branch):
    book(doctor, branch, "09:00")
    cancelled = book(doctor, branch, "09:15")
    book(doctor, branch, "09:30")
    services.appointment_cancel(appointment=cancelled, reason="Travelling", enforce_window=False)
    before = day_state(doctor)

    with pytest.raises(CommandError) as refused:
        reset(doctor, "--renumber")

    assert str(refused.value) == (
        "Refused: #2 (cancelled) keep their numbers (numbers are never reused), so renumbering the active "
        "appointments 1..k would hand some out twice. Use --start to move the next number instead."
    )
    assert day_state(doctor) == before


def test_renumber_is_refused_when_it_would_change_a_checked_in_patients_number(doctor, branch):
    book(doctor, branch, "09:15")  # token 1
    # Token 2, checked in by a direct write: check-in is allowed only on the appointment's day, and this
    # renumbering is planned ahead of it.
    Appointment.objects.filter(pk=book(doctor, branch, "09:00").pk).update(status=Appointment.Status.CHECKED_IN)
    before = day_state(doctor)

    with pytest.raises(CommandError, match=r"token #2 is checked in \(the patient holds that number\)"):
        reset(doctor, "--renumber")
    assert day_state(doctor) == before


def test_dry_run_prints_the_plan_and_changes_nothing(doctor, branch):
    book(doctor, branch, "09:15")
    book(doctor, branch, "09:00")
    before = day_state(doctor)

    out = reset(doctor, "--renumber", "--dry-run")

    assert "  Would change: token 2 -> 1 (" in out
    assert "  Would change: token 1 -> 2 (" in out
    assert out.endswith("  Would change: next token 3 -> 3\n  Dry run: nothing was written.\n")
    assert day_state(doctor) == before
    assert reset(doctor, "--start", "9", "--dry-run").endswith(
        "  Would change: next token 3 -> 9\n  Dry run: nothing was written.\n"
    )
    assert day_state(doctor) == before


def test_a_branch_where_the_doctor_does_not_consult_is_refused(doctor, branch):
    other = BranchFactory(code="MUM")
    with pytest.raises(CommandError, match="does not consult at MUM"):
        reset(doctor, "--start", "3", "--branch", str(other.id))
    assert reset(doctor, "--start", "3", "--branch", str(branch.id)).endswith("next token 1 -> 3\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--doctor", "not-a-uuid", "--date", "2026-11-30", "--start", "2"], "--doctor must be a UUID"),
        (["--doctor", "00000000-0000-0000-0000-000000000000", "--date", "2026-11-30", "--start", "2"], "No doctor"),
        (["--date", "2026-11-30", "--start", "2"], "the following arguments are required: --doctor"),
    ],
)
def test_bad_arguments_are_clear_errors(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("reset_token_sequence", *args)


def test_a_malformed_date_or_no_mode_is_a_clear_error(doctor):
    with pytest.raises(CommandError, match="--date must be YYYY-MM-DD"):
        call_command("reset_token_sequence", "--doctor", str(doctor.id), "--date", "30/11/2026", "--start", "2")
    with pytest.raises(CommandError, match="one of the arguments --start --renumber is required"):
        call_command("reset_token_sequence", "--doctor", str(doctor.id), "--date", DAY.isoformat())
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command(
            "reset_token_sequence", "--doctor", str(doctor.id), "--date", DAY.isoformat(), "--start", "2", "--renumber"
        )
