"""The reception pages' forms and what they show (appointments.admin): booking from the slot picker,
rescheduling, cancelling, and today's queue. The rules stay in the selectors and services; a form only
turns what staff chose into their arguments, scoped to the staff member's branches."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, cast

from django import forms
from django.utils import timezone

from appointments import selectors
from appointments.models import Appointment
from appointments.slots import Cell
from clinic.errors import FieldError, NotFound
from clinic.models import Branch, Doctor
from clinic.staff import StaffReader
from patients.selectors import patient_get


class SlotChoice(forms.Form):
    """The slot a picker's button posts: its start, an instant with its offset (as the API takes it)."""

    slot = forms.DateTimeField(input_formats=["%Y-%m-%dT%H:%M:%S%z"])


class BookingForm(forms.Form):
    """Patient, doctor, branch and day of the slot picker. The doctors are those of the staff member's
    branches; the branch may stay empty for a doctor who consults at one of them only (as in the API)."""

    patient = forms.CharField(max_length=32, label="Patient ID", help_text="e.g. PAT-000123")
    doctor = forms.ModelChoiceField(queryset=Doctor.objects.none())
    branch = forms.ModelChoiceField(queryset=Branch.objects.none(), required=False)
    date = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    visit_type = forms.ChoiceField(choices=Appointment.VisitType.choices, initial=Appointment.VisitType.CONSULTATION)

    def __init__(self, *args: Any, reader: StaffReader, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reader = reader
        cast(forms.ModelChoiceField, self.fields["doctor"]).queryset = selectors.reception_doctors(client=reader)
        cast(forms.ModelChoiceField, self.fields["branch"]).queryset = selectors.reception_branches(client=reader)

    def clean_patient(self) -> Any:
        ref = self.cleaned_data["patient"].strip()
        try:
            return patient_get(client=self.reader, ref=ref)
        except NotFound:
            raise forms.ValidationError(f"No patient {ref} at your branches.") from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        doctor, branch = cleaned.get("doctor"), cleaned.get("branch")
        if doctor is not None:
            try:
                cleaned["branch"] = selectors.doctor_branch_resolve(
                    client=self.reader, doctor=doctor, branch_id=branch.pk if branch else None
                )
            except FieldError as exc:
                self.add_error("branch", exc.errors["branch_id"])
        return cleaned

    @property
    def duration(self) -> timedelta:
        return timedelta(minutes=self.cleaned_data["doctor"].default_slot_minutes)


class RescheduleForm(forms.Form):
    date = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    reason = forms.CharField(max_length=500, required=False, widget=forms.TextInput(attrs={"size": 50}))


class CancelForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"size": 60}))


def slot_rows(cells: list[Cell], zone: Any) -> list[dict[str, str]]:
    """Each free cell as its button shows it: local start and end, and the instant it posts."""
    return [
        {
            "value": cell.start.isoformat(timespec="seconds"),
            "label": f"{timezone.localtime(cell.start, zone):%H:%M}-{timezone.localtime(cell.end, zone):%H:%M}",
        }
        for cell in cells
    ]


def local_today(branch: Branch) -> date:
    return timezone.localtime(timezone.now(), branch.zone).date()


def minutes_text(delta: timedelta) -> str:
    minutes = max(int(delta.total_seconds() // 60), 0)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def waiting_text(appointment: Appointment, now: datetime) -> str:
    """How long the patient has waited: since check-in; for one not yet checked in, since the slot began."""
    if appointment.status == Appointment.Status.CHECKED_IN and appointment.checked_in_at is not None:
        return f"{minutes_text(now - appointment.checked_in_at)} since check-in"
    if appointment.status == Appointment.Status.BOOKED:
        if appointment.slot_start <= now:
            return f"{minutes_text(now - appointment.slot_start)} since the slot"
        return f"due in {minutes_text(appointment.slot_start - now)}"
    return ""
