"""Staff resets of a doctor's token sequence for one local day (`manage.py reset_token_sequence`).

Token numbers are unique per doctor and day and never reused, so a reset is refused whenever it would
hand out a number some appointment of that day already holds. The counter row is locked for the whole
reset, so bookings of that doctor and day wait for it instead of racing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from django.db import transaction
from django.utils import timezone

from appointments import locks
from appointments.errors import UnsafeReset
from appointments.models import Appointment, AppointmentChange, TokenCounter
from clinic.models import Branch, Doctor


@dataclass
class TokenReset:
    doctor: Doctor
    local_date: date
    next_before: int
    next_after: int
    renumbered: list[tuple[Appointment, int, int]] = field(default_factory=list)


@transaction.atomic
def token_sequence_reset(
    *,
    doctor: Doctor,
    local_date: date,
    branch: Branch | None = None,
    start: int | None = None,
    renumber: bool = False,
    dry_run: bool = False,
) -> TokenReset:
    """`start`: the next token becomes `start`. `renumber`: the day's active appointments become 1..k in
    slot order and the next token k+1. With `dry_run` nothing is written; the plan is returned."""
    if (start is None) == (not renumber):
        raise UnsafeReset("Give exactly one of --start N or --renumber.")
    if branch is not None and not doctor.branches.filter(pk=branch.pk).exists():
        raise UnsafeReset(f"{doctor} does not consult at {branch.code}.")
    last_number = locks.doctor_day_lock(doctor=doctor, local_date=local_date)
    day = locks.day_appointments_lock(doctor=doctor, local_date=local_date)
    plan = TokenReset(doctor, local_date, last_number + 1, last_number + 1)
    if start is not None:
        if start < 1:
            raise UnsafeReset("--start must be 1 or more.")
        held = [a for a in day if a.token_number >= start]
        if held:
            numbers = ", ".join(str(a.token_number) for a in held)
            raise UnsafeReset(
                f"Refused: token(s) {numbers} are already held that day; the next token must be above "
                f"{max(a.token_number for a in held)} or the numbers would be handed out twice."
            )
        plan.next_after = start
    else:
        _plan_renumber(plan, day, branch)
    if not dry_run:
        _apply(plan)
    return plan


def _plan_renumber(plan: TokenReset, day: list[Appointment], branch: Branch | None) -> None:
    if day and plan.local_date < timezone.localdate(timezone.now(), day[0].branch.zone):
        raise UnsafeReset("Refused: that day is over; its token numbers are part of the record.")
    if branch is not None and any(a.branch_id != branch.pk for a in day):
        raise UnsafeReset(
            "Refused: the doctor also has appointments at another branch that day, and token numbers are "
            "shared across branches; run it without --branch."
        )
    kept = [a for a in day if a.status not in Appointment.ACTIVE_STATUSES]
    if kept:
        listed = ", ".join(f"#{a.token_number} ({a.status})" for a in kept)
        raise UnsafeReset(
            f"Refused: {listed} keep their numbers (numbers are never reused), so renumbering the active "
            "appointments 1..k would hand some out twice. Use --start to move the next number instead."
        )
    active = [a for a in day if a.status in Appointment.ACTIVE_STATUSES]
    for number, appointment in enumerate(active, start=1):
        if appointment.token_number == number:
            continue
        if appointment.status == Appointment.Status.CHECKED_IN:
            raise UnsafeReset(
                f"Refused: token #{appointment.token_number} is checked in (the patient holds that number); "
                "renumbering would change it."
            )
        plan.renumbered.append((appointment, appointment.token_number, number))
    plan.next_after = len(active) + 1


def _apply(plan: TokenReset) -> None:
    # Two steps so that swapping numbers never meets the unique (doctor, day, number) constraint midway.
    offset = 1_000_000
    for appointment, old, _new in plan.renumbered:
        Appointment.objects.filter(pk=appointment.pk).update(token_number=old + offset)
    for appointment, old, new in plan.renumbered:
        appointment.token_number = new
        appointment.version += 1
        appointment.save(update_fields=["token_number", "version", "updated_at"])
        AppointmentChange.objects.create(
            appointment=appointment,
            version=appointment.version,
            kind=AppointmentChange.Kind.TOKEN_RENUMBERED,
            at=appointment.updated_at,
            actor="command:reset_token_sequence",
            previous_token_number=old,
        )
    TokenCounter.objects.filter(doctor=plan.doctor, local_date=plan.local_date).update(last_number=plan.next_after - 1)
