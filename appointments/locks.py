"""The row locks the appointments services take, each held until the transaction commits.

Lock order, whatever the write: the doctor's day (its token counter row) first, then appointment rows,
then the patient's row.

- Booking: the day (taking a token number), then the patient.
- Rescheduling: the target day, then the appointment, then the patient; a move to another day takes
  that day's next token with the day already held.
- Cancel, check-in, complete, no-show: the appointment only.
- Token sequence reset (appointments.token_sequence): the day, then the day's appointments (with their
  patient and branch rows).

Taken in this one order, two writes never wait on each other in a cycle: without these locks, writes
racing into one interval (or one patient's time) meet in the exclusion constraints, and PostgreSQL
settles it with its deadlock detector, one aborting with "deadlock detected" (a 500) after a second's
wait. Serialised, the later write sees the earlier one's appointment and gets a clean 409.
"""

from __future__ import annotations

import uuid
from datetime import date

from django.db import connection

from appointments.models import Appointment, TokenCounter
from clinic.db import counter_lock, counter_next
from clinic.models import Doctor


def doctor_day_lock(*, doctor: Doctor, local_date: date) -> int:
    """Hold the doctor's day until commit without taking a token, and return the last token issued that
    day. Writes into one doctor's day then run one at a time."""
    return counter_lock(counter=TokenCounter, key={"doctor": doctor, "local_date": local_date})


def doctor_day_next_token(*, doctor: Doctor, local_date: date) -> int:
    """Take the doctor's next token number for the day, holding the day as doctor_day_lock does: bookings
    of one doctor and day are numbered in commit order, and a rollback returns the number."""
    return counter_next(counter=TokenCounter, key={"doctor": doctor, "local_date": local_date})


def appointment_lock(*, appointment_id: uuid.UUID) -> Appointment:
    """Re-read the appointment under a row lock (its row only), with what the lifecycle reads of it."""
    return (
        Appointment.objects.select_for_update(of=("self",))
        .select_related("patient", "doctor__department", "branch")
        .get(pk=appointment_id)
    )


def day_appointments_lock(*, doctor: Doctor, local_date: date) -> list[Appointment]:
    """Every appointment of the doctor's day, in slot order, locked with their patient and branch rows."""
    return list(
        Appointment.objects.select_for_update()
        .filter(doctor=doctor, local_date=local_date)
        .select_related("patient", "branch")
        .order_by("slot_start", "id")
    )


def patient_lock(*, patient_id: uuid.UUID) -> None:
    """Hold the patient's row until commit. FOR NO KEY UPDATE: rows referencing the patient can still be
    written (a visit, another app's record); two writes for one patient with two doctors at overlapping
    times are serialised instead of deadlocking in the patient exclusion constraint."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM patients_patient WHERE id = %s FOR NO KEY UPDATE", [patient_id])
