"""Reads of appointments and scheduling, through the calling client's branch restriction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Count, Min, Q, QuerySet

from appointments.models import Appointment
from clinic.errors import FieldError, NotFound
from clinic.models import Branch, Doctor
from clinic.selectors import doctor_branches_visible
from clinic.visibility import BranchRestricted
from integrations.models import ApiClient
from patients.models import Patient
from patients.selectors import Span, any_of, any_span


def doctor_branch_resolve(*, client: BranchRestricted, doctor: Doctor, branch_id: uuid.UUID | None) -> Branch:
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


def visible_appointments(client: BranchRestricted) -> QuerySet[Appointment]:
    return Appointment.objects.visible_to(client).select_related("patient", "doctor__department", "branch")


def appointment_queue(
    *, client: BranchRestricted, branch: Branch, day: date, doctor: Doctor | None = None
) -> list[Appointment]:
    """A branch's day as reception works it: every appointment of that local day but the cancelled ones, in
    slot order (then token), one doctor's or all."""
    appointments = visible_appointments(client).filter(branch=branch, local_date=day)
    if doctor is not None:
        appointments = appointments.filter(doctor=doctor)
    return list(appointments.exclude(status=Appointment.Status.CANCELLED).order_by("slot_start", "token_number"))


def reception_branches(*, client: BranchRestricted) -> QuerySet[Branch]:
    """The open branches a staff member books and runs queues at."""
    return Branch.objects.visible_to(client).filter(is_active=True).order_by("code", "id")


def reception_doctors(*, client: BranchRestricted, branch: Branch | None = None) -> QuerySet[Doctor]:
    """Active doctors of the staff member's branches (of `branch` alone when given), by name."""
    doctors = Doctor.objects.visible_to(client).filter(is_active=True)
    if branch is not None:
        doctors = doctors.filter(branches=branch)
    return doctors.select_related("department").order_by("name", "id")


def appointment_get(*, client: ApiClient, appointment_id: str) -> Appointment:
    try:
        key = uuid.UUID(appointment_id)
    except ValueError:
        raise NotFound(f"No appointment {appointment_id!r}.") from None
    appointment = visible_appointments(client).filter(id=key).first()
    if appointment is None:
        raise NotFound(f"No appointment {appointment_id!r}.")
    return appointment


def appointment_visible_get(*, client: ApiClient, appointment_id: uuid.UUID) -> Appointment:
    """An appointment named by another domain's body (a lab order, a prescription), from the client's
    branches only: the message those bodies give on their appointment_id field otherwise."""
    appointment = visible_appointments(client).filter(id=appointment_id).first()
    if appointment is None:
        raise NotFound(f"No appointment {appointment_id} available to this client.")
    return appointment


def doctor_filter_check(*, client: ApiClient, doctor_id: uuid.UUID) -> None:
    """A doctor named in a list filter must exist at one of the client's branches (inactive doctors
    included: their past appointments stay listable). Otherwise NotFound, as for an unknown id, so the
    filter reveals no one's existence. Closed branches count: their appointments stay listable too."""
    doctors = Doctor.objects.at_branches(Branch.objects.visible_to(client).values("id")).filter(id=doctor_id)
    if not doctors.exists():
        raise NotFound(f"No doctor {doctor_id} available to this client.")


def branch_filter_check(*, client: ApiClient, branch_id: uuid.UUID) -> None:
    if not Branch.objects.visible_to(client).filter(id=branch_id).exists():
        raise NotFound(f"No branch {branch_id} available to this client.")


def appointment_list(
    *,
    client: ApiClient,
    patient: Patient | None = None,
    doctor_id: uuid.UUID | None = None,
    branch_id: uuid.UUID | None = None,
    day: date | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    status: str | None = None,
) -> QuerySet[Appointment]:
    """Visible appointments in slot order; dates are the branch-local day of the slot. References are
    checked by the caller (doctor_filter_check, branch_filter_check, patient_get)."""
    appointments = visible_appointments(client)
    if patient is not None:
        appointments = appointments.filter(patient=patient)
    if doctor_id is not None:
        appointments = appointments.filter(doctor_id=doctor_id)
    if branch_id is not None:
        appointments = appointments.filter(branch_id=branch_id)
    if day is not None:
        appointments = appointments.filter(local_date=day)
    if date_from is not None:
        appointments = appointments.filter(local_date__gte=date_from)
    if date_to is not None:
        appointments = appointments.filter(local_date__lte=date_to)
    if status is not None:
        appointments = appointments.filter(status=status)
    return appointments.order_by("slot_start", "id")


# --- What a FHIR Appointment search asks (integrations.fhir.registry): one search parameter's alternatives
# in the app's own terms; each field given narrows to the rows matching one of its values (None does not).


@dataclass(frozen=True)
class AppointmentFilter:
    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    doctor_ids: tuple[uuid.UUID, ...] | None = None
    branch_ids: tuple[uuid.UUID, ...] | None = None
    statuses: tuple[str, ...] | None = None
    starts: tuple[Span, ...] | None = None
    updated: tuple[Span, ...] | None = None


def appointment_condition(where: AppointmentFilter) -> Q:
    return (
        any_of("pk", where.ids)
        & any_of("patient_id", where.patient_ids)
        & any_of("doctor_id", where.doctor_ids)
        & any_of("branch_id", where.branch_ids)
        & any_of("status", where.statuses)
        & any_span("slot_start", where.starts)
        & any_span("updated_at", where.updated)
    )


# Dashboard reads: today's queue per doctor for the admin's home page. One grouped query over the day's
# appointments of the reader's branches (the (branch, local_date) index), never one per doctor.


@dataclass(frozen=True)
class DoctorQueue:
    """A doctor's appointments of one day at one branch, counted by status, and since when the patient who
    has waited longest since checking in (still checked in) has been waiting."""

    branch_id: uuid.UUID
    branch_code: str
    doctor_id: uuid.UUID
    doctor_name: str
    day: date
    counts: dict[str, int]
    waiting_since: datetime | None


def queue_of_day(*, client: ApiClient, days: dict[date, list[uuid.UUID]]) -> list[DoctorQueue]:
    """Per doctor and branch, the appointments of `days` (a date -> the branches it is today at), by branch
    code then doctor name; cancelled ones are left out."""
    if not days:
        return []
    when = Q(pk__in=[])
    for day, branch_ids in days.items():
        when |= Q(local_date=day, branch_id__in=branch_ids)
    rows = (
        Appointment.objects.visible_to(client)
        .filter(when)
        .exclude(status=Appointment.Status.CANCELLED)
        .values("branch_id", "branch__code", "doctor_id", "doctor__name", "local_date", "status")
        .annotate(
            n=Count("pk"),
            since=Min("checked_in_at", filter=Q(status=Appointment.Status.CHECKED_IN)),
        )
        .order_by()
    )
    queues: dict[tuple[uuid.UUID, uuid.UUID], dict[str, Any]] = {}
    for row in rows:
        key = (row["branch_id"], row["doctor_id"])
        queue = queues.setdefault(
            key,
            {
                "branch_id": row["branch_id"],
                "branch_code": row["branch__code"],
                "doctor_id": row["doctor_id"],
                "doctor_name": row["doctor__name"],
                "day": row["local_date"],
                "counts": dict.fromkeys(Appointment.Status.values, 0),
                "waiting_since": None,
            },
        )
        queue["counts"][row["status"]] = row["n"]
        if row["since"] is not None:
            queue["waiting_since"] = row["since"]
    return sorted((DoctorQueue(**queue) for queue in queues.values()), key=lambda q: (q.branch_code, q.doctor_name))
