"""Reads of appointments and scheduling, through the calling client's branch restriction."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from appointments.models import Appointment
from clinic.errors import FieldError, NotFound
from clinic.models import Branch, Doctor
from clinic.selectors import client_branch_ids, doctor_branches_visible
from integrations.models import ApiClient


def doctor_branch_resolve(*, client: ApiClient, doctor: Doctor, branch_id: uuid.UUID | None) -> Branch:
    """The branch of a slot query or booking: the one named (the doctor must consult there), or the
    doctor's only branch visible to the client. Otherwise a 400 naming branch_id."""
    branches = doctor_branches_visible(client=client, doctor=doctor)
    if branch_id is not None:
        branch = next((b for b in branches if b.id == branch_id), None)
        if branch is None:
            raise FieldError({"branch_id": "This doctor does not consult at that branch."})
        return branch
    if len(branches) == 1:
        return branches[0]
    raise FieldError({"branch_id": "Required: this doctor consults at more than one branch."})


def visible_appointments(client: ApiClient) -> QuerySet[Appointment]:
    appointments = Appointment.objects.select_related("patient", "doctor__department", "branch")
    allowed = client_branch_ids(client)
    if allowed is not None:
        appointments = appointments.filter(branch_id__in=allowed)
    return appointments


def appointment_get(*, client: ApiClient, appointment_id: str) -> Appointment:
    try:
        key = uuid.UUID(appointment_id)
    except ValueError:
        raise NotFound(f"No appointment {appointment_id!r}.") from None
    appointment = visible_appointments(client).filter(id=key).first()
    if appointment is None:
        raise NotFound(f"No appointment {appointment_id!r}.")
    return appointment
