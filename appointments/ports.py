"""The appointments app's port: the typed functions the standard channels (integrations.fhir) call to read
what they need of the schedule. A channel imports this module, never appointments.slots nor a queryset."""

from __future__ import annotations

from datetime import date, timedelta

from appointments.slots import Cell, free_cells
from clinic.models import Branch, Doctor


def doctor_free_cells(*, doctor: Doctor, branch: Branch, day: date, duration: timedelta) -> list[Cell]:
    """The doctor's bookable cells of `duration` at the branch on its local `day`, future ones only: the cells
    a booking may take (FHIR Slot with status free)."""
    return free_cells(doctor=doctor, branch=branch, day=day, duration=duration)
