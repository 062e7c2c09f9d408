"""Reads of organisation data, restricted to what the calling API client may see."""

from __future__ import annotations

import uuid
from typing import cast

from django.db.models import Prefetch, QuerySet

from clinic.errors import FieldError, NotFound
from clinic.models import Branch, Doctor
from clinic.visibility import client_branch_ids
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
    serializers turn that into a 400 on branch_id)."""
    branch = Branch.objects.visible_to(client).filter(id=branch_id).first()
    if branch is None:
        raise NotFound(f"No branch {branch_id} available to this client.")
    return branch


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


def _visible_active_branches(client: ApiClient) -> QuerySet[Branch]:
    return Branch.objects.visible_to(client).filter(is_active=True)


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
    # One statement over the doctor's branch links, each joined to its doctor and branch, limited to the
    # active branches the client may see: the doctor is visible exactly when a link is found (the rule of
    # Doctor.objects.visible_to), and the links bring the branches a detail, a slot query and a booking use.
    # Every booking and slot query starts here; this is one statement where the doctor read and then its
    # branches were two (bench/results/plans_retired.md).
    links = list(
        Doctor.branches.through.objects.filter(
            doctor_id=key, doctor__is_active=True, branch__in=_visible_active_branches(client)
        )
        .select_related("doctor__department", "branch")
        .order_by("branch__code")
    )
    if not links:
        raise NotFound(f"No doctor {doctor_id!r}.")
    doctor = links[0].doctor
    doctor.__dict__[_VISIBLE_BRANCHES] = [link.branch for link in links]
    return doctor


def doctor_branches_visible(*, client: ApiClient, doctor: Doctor) -> list[Branch]:
    """The doctor's active branches the client may see: those doctor_get and doctor_list loaded, else read."""
    loaded = doctor.__dict__.get(_VISIBLE_BRANCHES)
    if loaded is None:
        loaded = list(_visible_active_branches(client).filter(doctors=doctor))
    return cast(list[Branch], loaded)
