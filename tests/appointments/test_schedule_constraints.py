"""The scheduling invariants PostgreSQL guarantees whatever the application does: no overlapping
sessions of a doctor, sane leave and holidays, no double-booked doctor or patient, unique tokens."""

from __future__ import annotations

from datetime import date, time, timedelta

import pytest
from django import forms
from django.db import IntegrityError, transaction

from appointments.models import Appointment, BranchHoliday, DoctorLeave, WeeklySession
from tests.appointments.factories import (
    AppointmentFactory,
    BranchHolidayFactory,
    DoctorLeaveFactory,
    WeeklySessionFactory,
    at,
    future_monday,
)
from tests.factories import BranchFactory, DoctorFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

OVERLAP_MESSAGE = "This doctor already has a session overlapping these hours on that day."


@pytest.fixture
def blr():
    return BranchFactory(code="BLR")


@pytest.fixture
def mum():
    return BranchFactory(code="MUM", state="Maharashtra")


@pytest.fixture
def doctor(blr, mum):
    return DoctorFactory(branches=[blr, mum])


# --- Weekly sessions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (time(11), time(13)),  # runs into the end
        (time(8), time(9, 30)),  # runs into the start
        (time(10), time(11)),  # inside
        (time(8), time(13)),  # around
        (time(9), time(12)),  # the same hours
        (time(11, 59), time(12, 30)),  # one minute
    ],
)
def test_an_overlapping_session_of_one_doctor_on_the_same_weekday_is_refused(doctor, blr, start, end):
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))

    with pytest.raises(IntegrityError, match="session_no_overlap_per_doctor"), transaction.atomic():
        WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=start, end=end)

    assert WeeklySession.objects.count() == 1


def test_an_overlapping_session_at_another_branch_is_refused(doctor, blr, mum):
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=2, start=time(9), end=time(12))

    with pytest.raises(IntegrityError, match="session_no_overlap_per_doctor"), transaction.atomic():
        WeeklySessionFactory(doctor=doctor, branch=mum, weekday=2, start=time(11), end=time(14))

    assert list(WeeklySession.objects.values_list("branch__code", flat=True)) == ["BLR"]


def test_moving_a_session_onto_another_is_refused(doctor, blr, mum):
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))
    later = WeeklySessionFactory(doctor=doctor, branch=mum, weekday=0, start=time(14), end=time(16))

    later.start = time(11)
    with pytest.raises(IntegrityError, match="session_no_overlap_per_doctor"), transaction.atomic():
        later.save()

    later.refresh_from_db()
    assert later.start == time(14)


def test_adjacent_sessions_are_allowed(doctor, blr, mum):
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(12), end=time(13))
    WeeklySessionFactory(doctor=doctor, branch=mum, weekday=0, start=time(8), end=time(9))

    assert [(s.start, s.end) for s in WeeklySession.objects.filter(doctor=doctor)] == [
        (time(8), time(9)),
        (time(9), time(12)),
        (time(12), time(13)),
    ]


def test_the_same_hours_on_other_weekdays_are_allowed(doctor, blr):
    for weekday in range(7):
        WeeklySessionFactory(doctor=doctor, branch=blr, weekday=weekday, start=time(9), end=time(12))

    assert sorted(WeeklySession.objects.values_list("weekday", flat=True)) == [0, 1, 2, 3, 4, 5, 6]


def test_another_doctor_may_have_the_same_hours(doctor, blr):
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))
    WeeklySessionFactory(doctor=DoctorFactory(branches=[blr]), branch=blr, weekday=0, start=time(9), end=time(12))

    assert WeeklySession.objects.filter(branch=blr, weekday=0).count() == 2


@pytest.mark.parametrize(("start", "end"), [(time(12), time(9)), (time(9), time(9))], ids=["before", "equal"])
def test_a_session_ending_at_or_before_its_start_is_refused(doctor, blr, start, end):
    with pytest.raises(IntegrityError, match="session_end_after_start"), transaction.atomic():
        WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=start, end=end)

    assert not WeeklySession.objects.exists()


@pytest.mark.parametrize("weekday", [7, 9])
def test_a_weekday_outside_monday_to_sunday_is_refused(doctor, blr, weekday):
    with pytest.raises(IntegrityError, match="session_weekday_range"), transaction.atomic():
        WeeklySessionFactory(doctor=doctor, branch=blr, weekday=weekday)

    assert not WeeklySession.objects.exists()


SessionForm = forms.modelform_factory(WeeklySession, fields="__all__")


def session_form(doctor, branch, weekday: int, start: str, end: str) -> forms.ModelForm:
    return SessionForm(data={"doctor": doctor.pk, "branch": branch.pk, "weekday": weekday, "start": start, "end": end})


def test_the_admin_form_of_an_overlapping_session_is_invalid_with_the_constraints_message(doctor, blr, mum):
    existing = WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))

    form = session_form(doctor, mum, 0, "11:00", "13:00")

    assert not form.is_valid()
    assert form.errors == {"__all__": [OVERLAP_MESSAGE]}
    with pytest.raises(ValueError, match="could not be created because the data didn't validate"):
        form.save()
    assert list(WeeklySession.objects.all()) == [existing]


def test_the_admin_form_of_an_adjacent_session_saves_it(doctor, blr):
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))

    form = session_form(doctor, blr, 0, "12:00", "13:00")

    assert form.is_valid(), form.errors
    saved = form.save()
    assert (saved.doctor, saved.branch, saved.weekday, saved.start, saved.end) == (doctor, blr, 0, time(12), time(13))
    assert WeeklySession.objects.count() == 2


def test_the_admin_form_may_edit_a_session_within_its_own_hours(doctor, blr):
    session = WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))

    form = SessionForm(
        data={"doctor": doctor.pk, "branch": blr.pk, "weekday": 0, "start": "10:00", "end": "12:30"}, instance=session
    )

    assert form.is_valid(), form.errors
    form.save()
    session.refresh_from_db()
    assert (session.start, session.end) == (time(10), time(12, 30))


def test_the_admin_form_refuses_an_end_before_the_start(doctor, blr):
    form = session_form(doctor, blr, 0, "12:00", "09:00")

    assert not form.is_valid()
    assert set(form.errors) in ({"end"}, {"__all__"})
    assert OVERLAP_MESSAGE not in str(form.errors)
    assert not WeeklySession.objects.exists()


# --- Leave and holidays ---------------------------------------------------------------------------


def test_leave_ending_before_it_starts_is_refused(doctor):
    monday = future_monday()

    with pytest.raises(IntegrityError, match="leave_end_not_before_start"), transaction.atomic():
        DoctorLeaveFactory(doctor=doctor, start_date=monday, end_date=monday - timedelta(days=1))

    assert not DoctorLeave.objects.exists()


def test_one_day_leave_and_overlapping_leave_are_allowed(doctor):
    monday = future_monday()
    DoctorLeaveFactory(doctor=doctor, start_date=monday, end_date=monday)
    DoctorLeaveFactory(doctor=doctor, start_date=monday - timedelta(days=2), end_date=monday + timedelta(days=2))

    assert DoctorLeave.objects.filter(doctor=doctor).count() == 2


def test_a_branch_holiday_twice_on_one_date_is_refused(blr):
    day = future_monday()
    BranchHolidayFactory(branch=blr, date=day, name="Diwali")

    with pytest.raises(IntegrityError, match="holiday_once_per_branch_day"), transaction.atomic():
        BranchHolidayFactory(branch=blr, date=day, name="Deepavali")

    assert list(BranchHoliday.objects.values_list("name", flat=True)) == ["Diwali"]


def test_the_same_holiday_date_at_two_branches_is_allowed(blr, mum):
    day = future_monday()
    BranchHolidayFactory(branch=blr, date=day)
    BranchHolidayFactory(branch=mum, date=day)

    assert BranchHoliday.objects.filter(date=day).count() == 2


# --- Appointments ---------------------------------------------------------------------------------


@pytest.fixture
def monday() -> date:
    return future_monday()


def appointment(doctor, branch, day, start: tuple[int, int], end: tuple[int, int], **kwargs):
    return AppointmentFactory(
        doctor=doctor, branch=branch, slot_start=at(day, *start, branch), slot_end=at(day, *end, branch), **kwargs
    )


@pytest.mark.parametrize("status", [Appointment.Status.BOOKED, Appointment.Status.CHECKED_IN])
def test_two_overlapping_active_appointments_of_one_doctor_are_refused(doctor, blr, mum, monday, status):
    appointment(doctor, blr, monday, (9, 0), (9, 30), status=status)

    for branch, start, end in [(blr, (9, 15), (9, 30)), (mum, (9, 20), (9, 40)), (blr, (8, 45), (9, 1))]:
        with pytest.raises(IntegrityError, match="appointment_no_double_booking"), transaction.atomic():
            appointment(doctor, branch, monday, start, end)

    assert Appointment.objects.count() == 1


@pytest.mark.parametrize(
    "status", [Appointment.Status.CANCELLED, Appointment.Status.COMPLETED, Appointment.Status.NO_SHOW]
)
def test_an_inactive_appointment_does_not_block_its_interval(doctor, blr, monday, status):
    appointment(doctor, blr, monday, (9, 0), (9, 15), status=status)
    appointment(doctor, blr, monday, (9, 0), (9, 15))

    assert sorted(Appointment.objects.values_list("status", flat=True)) == sorted([status, "booked"])


def test_reactivating_an_appointment_into_a_taken_interval_is_refused(doctor, blr, monday):
    cancelled = appointment(doctor, blr, monday, (9, 0), (9, 15), status=Appointment.Status.CANCELLED)
    appointment(doctor, blr, monday, (9, 0), (9, 15))

    cancelled.status = Appointment.Status.BOOKED
    with pytest.raises(IntegrityError, match="appointment_no_double_booking"), transaction.atomic():
        cancelled.save()

    cancelled.refresh_from_db()
    assert cancelled.status == Appointment.Status.CANCELLED


def test_adjacent_appointments_of_one_doctor_are_allowed(doctor, blr, monday):
    appointment(doctor, blr, monday, (9, 0), (9, 15))
    appointment(doctor, blr, monday, (9, 15), (9, 30))

    assert Appointment.objects.filter(doctor=doctor).count() == 2


def test_one_patient_with_two_overlapping_active_appointments_with_different_doctors_is_refused(blr, monday):
    patient = PatientFactory(registration_branch=blr)
    appointment(DoctorFactory(branches=[blr]), blr, monday, (9, 0), (9, 30), patient=patient)

    with pytest.raises(IntegrityError, match="appointment_patient_no_overlap"), transaction.atomic():
        appointment(DoctorFactory(branches=[blr]), blr, monday, (9, 15), (9, 45), patient=patient)

    assert Appointment.objects.filter(patient=patient).count() == 1


def test_one_patient_may_see_two_doctors_back_to_back_or_after_a_cancellation(blr, monday):
    patient = PatientFactory(registration_branch=blr)
    appointment(DoctorFactory(branches=[blr]), blr, monday, (9, 0), (9, 30), patient=patient)
    appointment(DoctorFactory(branches=[blr]), blr, monday, (9, 30), (10, 0), patient=patient)
    appointment(
        DoctorFactory(branches=[blr]),
        blr,
        monday,
        (9, 30),
        (10, 0),
        patient=patient,
        status=Appointment.Status.CANCELLED,
    )

    assert Appointment.objects.filter(patient=patient).count() == 3


def test_a_token_number_is_unique_per_doctor_and_local_day(doctor, blr, monday):
    appointment(doctor, blr, monday, (9, 0), (9, 15), token_number=1)

    with pytest.raises(IntegrityError, match="appointment_token_unique_per_doctor_day"), transaction.atomic():
        appointment(doctor, blr, monday, (10, 0), (10, 15), token_number=1, status=Appointment.Status.CANCELLED)

    assert list(Appointment.objects.values_list("token_number", flat=True)) == [1]


def test_the_same_token_number_on_another_day_or_for_another_doctor_is_allowed(doctor, blr, monday):
    appointment(doctor, blr, monday, (9, 0), (9, 15), token_number=1)
    appointment(doctor, blr, monday + timedelta(days=1), (9, 0), (9, 15), token_number=1)
    appointment(DoctorFactory(branches=[blr]), blr, monday, (9, 0), (9, 15), token_number=1)

    assert Appointment.objects.filter(token_number=1).count() == 3


def test_an_appointment_ending_at_or_before_its_start_is_refused(doctor, blr, monday):
    with pytest.raises(IntegrityError, match="appointment_end_after_start"), transaction.atomic():
        appointment(doctor, blr, monday, (9, 15), (9, 15))

    assert not Appointment.objects.exists()
