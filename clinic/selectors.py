"""Reads of organisation data, restricted to what the calling API client may see."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date
from functools import cache
from typing import Any, cast
from zoneinfo import ZoneInfo

from django.db import connection
from django.db.models import Model, Prefetch, Q, QuerySet
from django.utils import timezone

from clinic.errors import FieldError, NotFound
from clinic.lib.rows import columns, loaded, split
from clinic.models import Branch, Department, Doctor
from clinic.visibility import BranchRestricted, client_branch_ids
from integrations.models import ApiClient


def branch_by_ref(ref: str) -> Branch | None:
    """A branch by its code (any case) or id, for the management commands; None when there is none."""
    branch = Branch.objects.filter(code=ref.upper()).first()
    if branch is None:
        try:
            branch = Branch.objects.filter(id=uuid.UUID(ref)).first()
        except ValueError:
            return None
    return branch


def branch_visible_get(*, client: ApiClient, branch_id: uuid.UUID) -> Branch:
    """A branch named in a body or query filter: NotFound unless it exists and the client may see it (the
    serializers turn that into a 400 on branch_id). Every write naming a branch and every list filtering by
    one runs it: a constant statement (docs/architecture.md §6) with the client's branch ids as the rule's
    parameter (Branch.objects.visible_to), held to it by tests/clinic/test_doctor_statement.py."""
    allowed = client_branch_ids(client)
    any_branch, at_branches = _branch_statements()
    with connection.cursor() as cursor:
        if allowed is None:
            cursor.execute(any_branch, [branch_id])
        else:
            cursor.execute(at_branches, [branch_id, list(allowed)])
        row = cursor.fetchone()
    if row is None:
        raise NotFound(f"No branch {branch_id} available to this client.")
    return loaded(Branch, row)


@cache
def _branch_statements() -> tuple[str, str]:
    select = f'SELECT {columns(Branch, "b")} FROM "{Branch._meta.db_table}" b WHERE b.id = %s'  # noqa: S608 - _meta
    return select, f"{select} AND b.id = ANY(%s)"


def branch_only_default(*, client: ApiClient, action: str) -> Branch:
    """The branch of a write sent without branch_id: the client's only branch; else a 400 on branch_id saying
    the client may `action` (order, invoice, ...) at more than one branch."""
    allowed = client_branch_ids(client)
    if allowed is not None and len(allowed) == 1:
        return Branch.objects.visible_to(client).get()
    raise FieldError({"branch_id": f"Required: this client may {action} at more than one branch."})


def branch_list(*, client: ApiClient, state: str | None = None) -> QuerySet[Branch]:
    branches = _visible_active_branches(client)
    if state:
        branches = branches.filter(state=state)  # a canonical name (clinic.api.serializers.IndianStateField)
    return branches.order_by("code", "id")


def _visible_active_branches(client: BranchRestricted) -> QuerySet[Branch]:
    return Branch.objects.visible_to(client).filter(is_active=True)


# What a FHIR search asks of doctors (Practitioner) and branches (Organization, Location), in this app's own
# terms: each field given narrows to rows matching one of its values; None does not narrow.


@dataclass(frozen=True)
class DoctorFilter:
    ids: tuple[uuid.UUID, ...] | None = None
    name_contains: tuple[str, ...] | None = None  # a part of the name, case ignored


@dataclass(frozen=True)
class BranchFilter:
    ids: tuple[uuid.UUID, ...] | None = None
    name_contains: tuple[str, ...] | None = None  # a part of the name, case ignored
    codes: tuple[str, ...] | None = None  # the branch code, case ignored (BLR)
    states: tuple[str, ...] | None = None  # the state's name, case ignored


def _any_of(lookup: str, values: tuple[Any, ...] | None) -> Q:
    if values is None:
        return Q()
    wanted = Q(pk__in=[])
    for value in values:
        wanted |= Q(**{lookup: value.strip() if isinstance(value, str) else value})
    return wanted


def doctor_condition(where: DoctorFilter) -> Q:
    return _any_of("pk", where.ids) & _any_of("name__icontains", where.name_contains)


def branch_condition(where: BranchFilter) -> Q:
    codes = None if where.codes is None else tuple(code.upper() for code in where.codes)
    return (
        _any_of("pk", where.ids)
        & _any_of("name__icontains", where.name_contains)
        & _any_of("code", codes)
        & _any_of("state__iexact", where.states)
    )


def visible_doctors(client: ApiClient) -> QuerySet[Doctor]:
    """Active doctors working at an active branch the client may see (Doctor.objects.visible_to)."""
    return Doctor.objects.visible_to(client).filter(is_active=True)


_VISIBLE_BRANCHES = "visible_branches"


def _with_visible_branches(doctors: QuerySet[Doctor], client: ApiClient) -> QuerySet[Doctor]:
    """With the doctor's active branches the client may see, which is all a doctor shows of its branches."""
    branches = Prefetch("branches", queryset=_visible_active_branches(client), to_attr=_VISIBLE_BRANCHES)
    return doctors.select_related("department").prefetch_related(branches)


def doctor_list(
    *, client: ApiClient, branch_id: uuid.UUID | None = None, department: str | None = None
) -> QuerySet[Doctor]:
    doctors = visible_doctors(client)
    if branch_id is not None:
        # Only through a visible branch: filtering by a hidden one must not list who works there.
        doctors = doctors.filter(branches__in=_visible_active_branches(client).filter(id=branch_id))
    if department:
        try:
            doctors = doctors.filter(department_id=uuid.UUID(department))
        except ValueError:
            doctors = doctors.filter(department__name__iexact=department)
    return _with_visible_branches(doctors, client).order_by("name", "id")


def doctor_get(*, client: ApiClient, doctor_id: str) -> Doctor:
    """404 for an unknown id, a malformed one, or a doctor at no branch the client may see."""
    try:
        key = uuid.UUID(doctor_id)
    except ValueError:
        raise NotFound(f"No doctor {doctor_id!r}.") from None
    # One constant statement over the doctor's branch links, each joined to its doctor, department and branch,
    # limited to the active branches the client may see: the doctor is visible exactly when a link is found
    # (the rule of Doctor.objects.visible_to, with the client's branch ids as the parameter), and the links
    # bring the branches a detail, a slot query and a booking use. Every booking and slot query starts here;
    # composing it through the ORM cost about 3 ms of CPU per request (bench/results/plans_retired.md).
    # tests/clinic/test_doctor_statement.py holds the ORM read it must agree with.
    allowed = client_branch_ids(client)
    any_branch, at_branches = _doctor_statements()
    with connection.cursor() as cursor:
        if allowed is None:
            cursor.execute(any_branch, [key])
        else:
            cursor.execute(at_branches, [key, list(allowed)])
        rows = cursor.fetchall()
    if not rows:
        raise NotFound(f"No doctor {doctor_id!r}.")
    first = split(rows[0], *_JOINED)
    doctor = cast(Doctor, first[0])
    doctor.department = cast(Department, first[1])
    doctor.__dict__[_VISIBLE_BRANCHES] = [split(row, *_JOINED)[2] for row in rows]
    return doctor


_JOINED: tuple[type[Model], ...] = (Doctor, Department, Branch)


@cache
def _doctor_statements() -> tuple[str, str]:
    """The doctor-with-branches read for a client that sees every branch, and for one limited to some (its
    branch ids the last parameter). Every identifier is a model's own table or column name."""
    link = Doctor.branches.through._meta
    to_doctor, to_branch = link.get_field("doctor").column, link.get_field("branch").column
    selected = ", ".join(columns(model, alias) for model, alias in zip(_JOINED, ("d", "dep", "b"), strict=True))
    sql = (
        f'SELECT {selected} FROM "{link.db_table}" l'  # noqa: S608 - identifiers from _meta, values are parameters
        f' JOIN "{Doctor._meta.db_table}" d ON d.id = l."{to_doctor}"'
        f' JOIN "{Department._meta.db_table}" dep ON dep.id = d."{Doctor._meta.get_field("department").column}"'
        f' JOIN "{Branch._meta.db_table}" b ON b.id = l."{to_branch}"'
        f' WHERE l."{to_doctor}" = %s AND d.is_active AND b.is_active'
    )
    return f"{sql} ORDER BY b.code", f"{sql} AND b.id = ANY(%s) ORDER BY b.code"


def doctor_branches_visible(*, client: BranchRestricted, doctor: Doctor) -> list[Branch]:
    """The doctor's active branches the client may see: those doctor_get and doctor_list loaded, else read."""
    loaded = doctor.__dict__.get(_VISIBLE_BRANCHES)
    if loaded is None:
        loaded = list(_visible_active_branches(client).filter(doctors=doctor))
    return cast(list[Branch], loaded)


# Dashboard reads: "today" is each branch's own day (Branch.time_zone), so the home page's numbers of a staff
# member with branches in several time zones are read per day, each with the branches it is today at.


def branch_days_today(*, client: Any) -> dict[date, list[uuid.UUID]]:
    """The reader's active branches, grouped by today's date at each (one group unless their zones differ)."""
    days: dict[date, list[uuid.UUID]] = {}
    now = timezone.now()
    for branch_id, zone in Branch.objects.visible_to(client).filter(is_active=True).values_list("id", "time_zone"):
        days.setdefault(timezone.localtime(now, ZoneInfo(zone)).date(), []).append(branch_id)
    return days
