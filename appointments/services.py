"""Writes on appointments. Booking is race-safe: the free-cell rule is checked in Python for a clear
answer, and PostgreSQL's exclusion constraints make a double booking impossible even when two requests
pass that check at once."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django.db import IntegrityError, connection, transaction

from appointments import events
from appointments.models import Appointment
from appointments.slots import is_free_cell
from clinic.errors import Conflict
from clinic.models import Branch, Doctor
from patients.models import Patient

_OVERLAP_CONSTRAINTS = ("appointment_no_double_booking", "appointment_patient_no_overlap")
# The cell lengths GET slots offers (its `duration`, whole minutes 5..240): no other interval is a cell.
_SHORTEST_CELL, _LONGEST_CELL = timedelta(minutes=5), timedelta(minutes=240)


class SlotUnavailable(Conflict):
    code = "slot_unavailable"
    title = "Slot unavailable"


def _next_token(doctor: Doctor, local_date: date) -> int:
    """Take the doctor's next token number for the day. The counter row stays locked until commit, so
    bookings of one doctor and day are numbered in commit order, and a rollback returns the number."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO appointments_tokencounter (doctor_id, local_date, last_number) VALUES (%s, %s, 1) "
            "ON CONFLICT (doctor_id, local_date) "
            "DO UPDATE SET last_number = appointments_tokencounter.last_number + 1 RETURNING last_number",
            [doctor.pk, local_date],
        )
        return int(cursor.fetchone()[0])


@transaction.atomic
def appointment_book(
    *,
    patient: Patient,
    doctor: Doctor,
    branch: Branch,
    slot_start: datetime,
    slot_end: datetime,
    visit_type: str = Appointment.VisitType.CONSULTATION,
    notes: str = "",
) -> Appointment:
    """Book [slot_start, slot_end) if it is one of the doctor's free cells; 409 slot_unavailable otherwise,
    or when the patient already has an overlapping active appointment."""
    # Checked before the grid is built: a one-second interval is otherwise a cell of the one-second grid,
    # and a one-microsecond interval would make it enumerate billions of cells.
    duration = slot_end - slot_start
    if (
        not _SHORTEST_CELL <= duration <= _LONGEST_CELL
        or duration % timedelta(minutes=1)
        or not is_free_cell(doctor=doctor, branch=branch, start=slot_start, end=slot_end)
    ):
        raise SlotUnavailable("That interval is not a free slot of this doctor at this branch.")
    local_date = slot_start.astimezone(branch.zone).date()
    token_number = _next_token(doctor, local_date)
    try:
        with transaction.atomic():
            appointment = Appointment.objects.create(
                patient=patient,
                doctor=doctor,
                branch=branch,
                slot_start=slot_start,
                slot_end=slot_end,
                local_date=local_date,
                token_number=token_number,
                visit_type=visit_type,
                notes=notes,
            )
    except IntegrityError as exc:
        # Lost a race for the cell, or the patient is booked elsewhere at that time. Raising rolls the
        # whole transaction back, the token counter's increment included: no gap.
        if any(name in str(exc) for name in _OVERLAP_CONSTRAINTS):
            detail = (
                "The patient already has an appointment at that time."
                if "appointment_patient_no_overlap" in str(exc)
                else "That slot was just booked by another request."
            )
            raise SlotUnavailable(detail) from None
        raise
    events.publish("appointment.booked", appointment)
    return appointment
