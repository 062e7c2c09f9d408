"""The free-slot grid of docs/api-rules.md §10: one rule set for GET slots and for booking.

A doctor's sessions at a branch on a local date, minus leave and branch holidays, cut into cells of
`duration` minutes from each session's start (a remainder shorter than a cell is dropped), minus cells
overlapping an active appointment of that doctor (at any branch), minus cells already started.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import DateField, DateTimeField, Exists, IntegerField, QuerySet, UUIDField
from django.utils import timezone

from appointments.models import Appointment, BranchHoliday, DoctorLeave, WeeklySession
from clinic.models import Branch, Doctor
from clinic.query_plans import QueryPlan, Slot


@dataclass(frozen=True)
class Cell:
    start: datetime
    end: datetime


# The day's sessions, none when the branch is closed or the doctor is on leave: one precompiled statement
# (every booking and slot query runs it).
_SESSIONS: QueryPlan[Any] = QueryPlan(
    lambda: (
        WeeklySession.objects.filter(
            doctor_id=Slot("doctor", UUIDField()),
            branch_id=Slot("branch", UUIDField()),
            weekday=Slot("weekday", IntegerField()),
        )
        .filter(
            ~Exists(BranchHoliday.objects.filter(branch_id=Slot("branch", UUIDField()), date=Slot("day", DateField())))
        )
        .filter(
            ~Exists(
                DoctorLeave.objects.filter(
                    doctor_id=Slot("doctor", UUIDField()),
                    start_date__lte=Slot("day", DateField()),
                    end_date__gte=Slot("day", DateField()),
                )
            )
        )
        .order_by("start")
        .values_list("start", "end")
    )
)


def grid(*, doctor: Doctor, branch: Branch, day: date, duration: timedelta) -> list[Cell]:
    """All cells of the doctor's sessions that day, before removing booked and started ones."""
    sessions = _SESSIONS.rows(doctor=doctor.pk, branch=branch.pk, weekday=day.weekday(), day=day)
    zone = branch.zone
    cells = []
    for session_start, session_end_time in sessions:
        # Step in UTC: arithmetic on a zoned datetime is wall-clock, which on a DST change day yields
        # cells of the wrong length, repeated instants and local times that do not exist.
        cursor = datetime.combine(day, session_start, tzinfo=zone).astimezone(UTC)
        session_end = datetime.combine(day, session_end_time, tzinfo=zone).astimezone(UTC)
        while cursor + duration <= session_end:
            cells.append(Cell(cursor, cursor + duration))
            cursor += duration
    return cells


# The cell lengths GET slots offers (its `duration`, whole minutes 5..240): no other interval is a cell.
SHORTEST_CELL, LONGEST_CELL = timedelta(minutes=5), timedelta(minutes=240)


def _busy(*, ignoring: bool) -> QueryPlan[Appointment]:
    """The doctor's active appointments overlapping [since, until), at any branch (precompiled)."""

    def build() -> QuerySet[Any, Any]:
        appointments = Appointment.objects.filter(
            doctor_id=Slot("doctor", UUIDField()),
            status__in=Appointment.ACTIVE_STATUSES,
            slot_start__lt=Slot("until", DateTimeField()),
            slot_end__gt=Slot("since", DateTimeField()),
        )
        if ignoring:
            appointments = appointments.exclude(pk=Slot("ignoring", UUIDField()))
        return appointments.values_list("slot_start", "slot_end").order_by()

    return QueryPlan(build)


_BUSY, _BUSY_IGNORING = _busy(ignoring=False), _busy(ignoring=True)


def free_cells(
    *, doctor: Doctor, branch: Branch, day: date, duration: timedelta, ignoring: Appointment | None = None
) -> list[Cell]:
    """The free cells; `ignoring` is an appointment being rescheduled, whose own time does not block."""
    cells = grid(doctor=doctor, branch=branch, day=day, duration=duration)
    if not cells:
        return []
    now = timezone.now()
    window: dict[str, Any] = {"doctor": doctor.pk, "until": cells[-1].end, "since": cells[0].start}
    busy = _BUSY.rows(**window) if ignoring is None else _BUSY_IGNORING.rows(**window, ignoring=ignoring.pk)
    return [
        cell
        for cell in cells
        if cell.start > now and not any(start < cell.end and cell.start < end for start, end in busy)
    ]


def is_free_cell(
    *, doctor: Doctor, branch: Branch, start: datetime, end: datetime, ignoring: Appointment | None = None
) -> bool:
    """Booking rule: [start, end) is exactly one of the free cells for that duration and local date."""
    duration = end - start
    # Checked before the grid is built: a one-second interval is otherwise a cell of the one-second grid,
    # and a one-microsecond interval would make it enumerate billions of cells.
    if not SHORTEST_CELL <= duration <= LONGEST_CELL or duration % timedelta(minutes=1):
        return False
    day = start.astimezone(branch.zone).date()
    cells = free_cells(doctor=doctor, branch=branch, day=day, duration=duration, ignoring=ignoring)
    return Cell(start, end) in set(cells)
