"""Doctors' weekly sessions, leave and branch holidays; appointments and their per-day token counters."""

from __future__ import annotations

import uuid

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeOperators
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Func, Q
from django.utils import timezone

from clinic.models import Branch, Doctor, TimeStampedModel
from clinic.visibility import BranchScopedQuerySet
from patients.models import Patient, Visit


class TimeOfDayRange(Func):
    """tsrange over a fixed date: lets an exclusion constraint compare times of day for overlap."""

    function = "tsrange"
    template = "tsrange(DATE '2000-01-01' + %(expressions)s)"
    arg_joiner = ", DATE '2000-01-01' + "
    output_field = DateTimeRangeField()


class TstzRange(Func):
    function = "tstzrange"
    output_field = DateTimeRangeField()


class WeeklySession(TimeStampedModel):
    """A doctor consults at a branch every week on `weekday` from `start` to `end` (branch local time).
    A doctor can hold several sessions a day, but never two that overlap, at any branch."""

    class Weekday(models.IntegerChoices):
        MONDAY = 0
        TUESDAY = 1
        WEDNESDAY = 2
        THURSDAY = 3
        FRIDAY = 4
        SATURDAY = 5
        SUNDAY = 6

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    doctor = models.ForeignKey(Doctor, on_delete=models.CASCADE, related_name="sessions")
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="sessions")
    weekday = models.PositiveSmallIntegerField(choices=Weekday.choices)
    start = models.TimeField()
    end = models.TimeField()

    class Meta:
        ordering = ["doctor", "weekday", "start"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=models.F("start")), name="session_end_after_start"),
            models.CheckConstraint(condition=Q(weekday__gte=0, weekday__lte=6), name="session_weekday_range"),
            ExclusionConstraint(
                name="session_no_overlap_per_doctor",
                expressions=[
                    ("doctor", RangeOperators.EQUAL),
                    ("weekday", RangeOperators.EQUAL),
                    (TimeOfDayRange("start", "end"), RangeOperators.OVERLAPS),
                ],
                violation_error_message="This doctor already has a session overlapping these hours on that day.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.doctor} {self.get_weekday_display()} {self.start:%H:%M}-{self.end:%H:%M} @ {self.branch.code}"

    def clean(self) -> None:
        # Before the overlap constraint is validated: an inverted range would make its query fail (500).
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValidationError({"end": "The session must end after it starts."})


class DoctorLeave(TimeStampedModel):
    """Days (inclusive) on which a doctor has no slots anywhere."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    doctor = models.ForeignKey(Doctor, on_delete=models.CASCADE, related_name="leaves")
    start_date = models.DateField()
    end_date = models.DateField()
    reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-start_date"]
        verbose_name_plural = "doctor leave"
        constraints = [
            models.CheckConstraint(
                condition=Q(end_date__gte=models.F("start_date")), name="leave_end_not_before_start"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.doctor} {self.start_date}..{self.end_date}"


class BranchHoliday(TimeStampedModel):
    """A day a branch is closed: no slots for any doctor there."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="holidays")
    date = models.DateField()
    name = models.CharField(max_length=100)

    class Meta:
        ordering = ["-date"]
        constraints = [models.UniqueConstraint(fields=["branch", "date"], name="holiday_once_per_branch_day")]

    def __str__(self) -> str:
        return f"{self.branch.code} {self.date} {self.name}"


class AppointmentQuerySet(BranchScopedQuerySet["Appointment"]):
    pass


class Appointment(TimeStampedModel):
    """A booked consultation. Active appointments (booked, checked in) of one doctor, or of one patient,
    never overlap: PostgreSQL exclusion constraints guarantee it whatever the application does."""

    class Status(models.TextChoices):
        BOOKED = "booked"
        CHECKED_IN = "checked_in"
        COMPLETED = "completed"
        CANCELLED = "cancelled"
        NO_SHOW = "no_show"

    class VisitType(models.TextChoices):
        CONSULTATION = "consultation"
        FOLLOW_UP = "follow_up"
        PROCEDURE = "procedure"
        TELECONSULTATION = "teleconsultation"
        EMERGENCY = "emergency"

    ACTIVE_STATUSES = (Status.BOOKED, Status.CHECKED_IN)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="appointments")
    doctor = models.ForeignKey(Doctor, on_delete=models.PROTECT, related_name="appointments")
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="appointments")
    slot_start = models.DateTimeField()
    slot_end = models.DateTimeField()
    local_date = models.DateField(help_text="The day of slot_start in the branch's time zone (token numbering).")
    token_number = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.BOOKED)
    visit_type = models.CharField(max_length=20, choices=VisitType.choices, default=VisitType.CONSULTATION)
    notes = models.TextField(blank=True)
    checked_in_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancellation_reason = models.CharField(max_length=500, blank=True)
    visit = models.OneToOneField(
        Visit,
        null=True,
        blank=True,
        on_delete=models.PROTECT,  # visits are never deleted (docs/api-rules.md §7)
        related_name="appointment",
        help_text="The outpatient visit added to the patient's history when the appointment was completed.",
    )
    version = models.PositiveIntegerField(default=1, help_text="Increases with every change.")

    objects = AppointmentQuerySet.as_manager()

    class Meta:
        ordering = ["slot_start", "id"]
        indexes = [
            # The admin list filtered by status, in slot order (a branch's booked ones among two years of visits).
            models.Index(fields=["status", "slot_start", "id"], name="appointment_status_start"),
            models.Index(fields=["doctor", "slot_start"], name="appointment_doctor_start"),
            models.Index(fields=["patient", "slot_start"], name="appointment_patient_start"),
            models.Index(fields=["branch", "local_date"], name="appointment_branch_day"),
            # FHIR Appointment?date=... across doctors and patients, and its default order (slot_start, id).
            models.Index(fields=["slot_start", "id"], name="appointment_start_order"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(slot_end__gt=models.F("slot_start")), name="appointment_end_after_start"
            ),
            models.UniqueConstraint(
                fields=["doctor", "local_date", "token_number"], name="appointment_token_unique_per_doctor_day"
            ),
            ExclusionConstraint(
                name="appointment_no_double_booking",
                expressions=[
                    ("doctor", RangeOperators.EQUAL),
                    (TstzRange("slot_start", "slot_end"), RangeOperators.OVERLAPS),
                ],
                condition=Q(status__in=["booked", "checked_in"]),
                violation_error_message="The doctor already has an appointment in this interval.",
            ),
            ExclusionConstraint(
                name="appointment_patient_no_overlap",
                expressions=[
                    ("patient", RangeOperators.EQUAL),
                    (TstzRange("slot_start", "slot_end"), RangeOperators.OVERLAPS),
                ],
                condition=Q(status__in=["booked", "checked_in"]),
                violation_error_message="The patient already has an appointment in this interval.",
            ),
        ]

    def __str__(self) -> str:
        # In the branch's time zone, as staff read the clock (a 9:00 slot was labelled 03:30, in UTC).
        start = timezone.localtime(self.slot_start, self.branch.zone)
        return f"{self.doctor} {start:%Y-%m-%d %H:%M %Z} #{self.token_number}"

    def clean(self) -> None:
        # An inverted interval would otherwise be reported as a misleading overlap by the constraints.
        if self.slot_start is not None and self.slot_end is not None and self.slot_end <= self.slot_start:
            raise ValidationError({"slot_end": "The appointment must end after it starts."})


class AppointmentChange(models.Model):
    """The history of one appointment: every booking, reschedule and status change, with who made it
    and why. Reschedules keep the times they moved from."""

    class Kind(models.TextChoices):
        BOOKED = "booked"
        RESCHEDULED = "rescheduled"
        CANCELLED = "cancelled"
        CHECKED_IN = "checked_in"
        COMPLETED = "completed"
        NO_SHOW = "no_show"
        TOKEN_RENUMBERED = "token_renumbered"  # noqa: S105 - a history kind, not a secret

    id = models.BigAutoField(primary_key=True)
    appointment = models.ForeignKey(Appointment, on_delete=models.PROTECT, related_name="changes")
    version = models.PositiveIntegerField(help_text="The appointment's version after this change.")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    at = models.DateTimeField()
    actor = models.CharField(max_length=200, help_text='"api:<client name>", "staff:<username>" or "system".')
    reason = models.CharField(max_length=500, blank=True)
    previous_slot_start = models.DateTimeField(null=True, blank=True)
    previous_slot_end = models.DateTimeField(null=True, blank=True)
    previous_token_number = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["appointment", "version"]
        constraints = [
            models.UniqueConstraint(fields=["appointment", "version"], name="appointment_change_once_per_version")
        ]

    def __str__(self) -> str:
        return f"{self.appointment_id} v{self.version} {self.kind}"


class TokenCounter(models.Model):
    """The last token number issued for a doctor on a local day; incremented by upsert in the booking
    transaction, so numbers are gap-free (a rolled-back booking rolls its increment back) and unique."""

    id = models.BigAutoField(primary_key=True)
    doctor = models.ForeignKey(Doctor, on_delete=models.CASCADE, related_name="+")
    local_date = models.DateField()
    last_number = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["doctor", "local_date"], name="token_counter_per_doctor_day")]

    def __str__(self) -> str:
        return f"{self.doctor_id} {self.local_date}: {self.last_number}"
