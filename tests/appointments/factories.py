"""factory-boy factories for schedules, leave, holidays and appointments, and dates the tests share."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

import factory
from django.utils import timezone

from appointments.models import Appointment, BranchHoliday, DoctorLeave, WeeklySession
from tests.factories import BranchFactory, DoctorFactory
from tests.patients.factories import PatientFactory

# Factory token numbers start high so they never meet the numbers the booking service hands out.
FACTORY_TOKEN_BASE = 9_000


def future_monday(weeks: int = 4) -> date:
    """A Monday at least `weeks` weeks after today: far enough that no cell of it has started."""
    today = timezone.localdate()
    return today + timedelta(days=7 * weeks - today.weekday())


def at(day: date, hour: int, minute: int, branch) -> datetime:
    """An aware datetime: `day` at hour:minute in the branch's local time."""
    return datetime.combine(day, time(hour, minute), tzinfo=branch.zone)


class WeeklySessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WeeklySession

    branch = factory.SubFactory(BranchFactory)
    doctor = factory.LazyAttribute(lambda o: DoctorFactory(branches=[o.branch]))
    weekday = WeeklySession.Weekday.MONDAY
    start = time(9, 0)
    end = time(12, 0)


class DoctorLeaveFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DoctorLeave

    doctor = factory.SubFactory(DoctorFactory)
    start_date = factory.LazyFunction(future_monday)
    end_date = factory.SelfAttribute("start_date")
    reason = "Conference"


class BranchHolidayFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BranchHoliday

    branch = factory.SubFactory(BranchFactory)
    date = factory.LazyFunction(future_monday)
    name = "Festival"


class AppointmentFactory(factory.django.DjangoModelFactory):
    """AppointmentFactory(doctor=d, branch=b, slot_start=..., slot_end=...): a row written directly,
    without the booking service (the tests of the read side need "booked cells" only)."""

    class Meta:
        model = Appointment

    branch = factory.SubFactory(BranchFactory)
    doctor = factory.LazyAttribute(lambda o: DoctorFactory(branches=[o.branch]))
    patient = factory.SubFactory(PatientFactory, registration_branch=factory.SelfAttribute("..branch"))
    slot_start = factory.LazyAttribute(lambda o: at(future_monday(), 9, 0, o.branch))
    slot_end = factory.LazyAttribute(lambda o: o.slot_start + timedelta(minutes=15))
    local_date = factory.LazyAttribute(lambda o: o.slot_start.astimezone(o.branch.zone).date())
    token_number = factory.Sequence(lambda n: FACTORY_TOKEN_BASE + n)
    status = Appointment.Status.BOOKED
