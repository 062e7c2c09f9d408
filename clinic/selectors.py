"""Reads of organisation data, restricted to what the calling API client may see."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import cache
from typing import Any, cast

from django.contrib.postgres.fields import ArrayField
from django.db.models import CharField, Exists, F, OuterRef, QuerySet, UUIDField

from clinic.errors import FieldError, NotFound
from clinic.models import Branch, Doctor
from clinic.query_plans import AnyOf, QueryPlan, Slot, prefetched
from integrations.models import ApiClient

_BRANCH_IDS = "_clinic_branch_ids"


def client_branch_ids(client: ApiClient) -> frozenset[uuid.UUID] | None:
    """The branches a client is limited to, or None when it may see every branch (cached per instance,
    i.e. per request, since the client is loaded with the token on every request)."""
    if _BRANCH_IDS not in client.__dict__:
        ids = frozenset(client.branches.values_list("id", flat=True))
        client.__dict__[_BRANCH_IDS] = ids or None
    return cast(frozenset[uuid.UUID] | None, client.__dict__[_BRANCH_IDS])


def client_branch_ids_known(client: ApiClient, ids: Iterable[uuid.UUID]) -> None:
    """Record the client's branch restriction read with its token (clinic.api.bearer), sparing the query."""
    client.__dict__[_BRANCH_IDS] = frozenset(ids) or None


def branch_by_ref(ref: str) -> Branch | None:
    """A branch by its code (any case) or id, for the management commands; None when there is none."""
    branch = Branch.objects.filter(code=ref.upper()).first()
    if branch is None:
        try:
            branch = Branch.objects.filter(id=uuid.UUID(ref)).first()
        except ValueError:
            return None
    return branch


_BRANCH_BY_ID = QueryPlan(lambda: Branch.objects.filter(id=Slot("id", UUIDField())))


def branch_visible_get(*, client: ApiClient, branch_id: uuid.UUID) -> Branch:
    """A branch named in a body or query filter: NotFound unless it exists and the client may see it (the
    serializers turn that into a 400 on branch_id)."""
    allowed = client_branch_ids(client)
    # Precompiled: as an ORM query, compiled on every request, it was a third of a one-branch summary's CPU.
    found = _BRANCH_BY_ID.fetch(id=branch_id)
    if not found or (allowed is not None and found[0].id not in allowed):
        raise NotFound(f"No branch {branch_id} available to this client.")
    return found[0]


def branch_only_default(*, client: ApiClient, action: str) -> Branch:
    """The branch of a write sent without branch_id: the client's only branch; else a 400 on branch_id saying
    the client may `action` (order, invoice, ...) at more than one branch."""
    allowed = client_branch_ids(client)
    if allowed is not None and len(allowed) == 1:
        return Branch.objects.get(id=next(iter(allowed)))
    raise FieldError({"branch_id": f"Required: this client may {action} at more than one branch."})


def branch_list(*, client: ApiClient, state: str | None = None) -> QuerySet[Branch]:
    branches = Branch.objects.filter(is_active=True)
    allowed = client_branch_ids(client)
    if allowed is not None:
        branches = branches.filter(id__in=allowed)
    if state:
        branches = branches.filter(state=state)  # a canonical name (clinic.api.serializers.IndianStateField)
    return branches.order_by("code", "id")


@cache
def _branches_plan(*, restricted: bool, by_state: bool) -> QueryPlan[Branch]:
    def build() -> QuerySet[Branch]:
        branches = Branch.objects.filter(is_active=True)
        if restricted:
            branches = branches.filter(AnyOf(F("id"), Slot("allowed", ArrayField(UUIDField()))))
        if by_state:
            branches = branches.filter(state=Slot("state", CharField()))
        return branches.order_by("code", "id")

    return QueryPlan(build)


def branches_visible(*, client: ApiClient, state: str | None = None) -> list[Branch]:
    """branch_list's branches, read whole with one precompiled statement (GET /branches, the framework
    floor: a network has tens of branches, so the page is cut from the list and its total is its length)."""
    allowed = client_branch_ids(client)
    values: dict[str, Any] = {}
    if allowed is not None:
        values["allowed"] = list(allowed)
    if state:
        values["state"] = state
    return _branches_plan(restricted=allowed is not None, by_state=bool(state)).fetch(**values)


def _doctor_branches(client: ApiClient) -> QuerySet[Branch]:
    branches = Branch.objects.filter(is_active=True)
    allowed = client_branch_ids(client)
    if allowed is not None:
        branches = branches.filter(id__in=allowed)
    return branches


def visible_doctors(client: ApiClient) -> QuerySet[Doctor]:
    """Active doctors working at an active branch the client may see. A doctor whose only branches are
    closed (or who has none) has no slots to offer, and the branch list hides closed branches too."""
    works_at_visible = Doctor.branches.through.objects.filter(
        doctor_id=OuterRef("pk"), branch__in=_doctor_branches(client)
    )
    return Doctor.objects.filter(Exists(works_at_visible), is_active=True)


def doctor_list(
    *, client: ApiClient, branch_id: uuid.UUID | None = None, department: str | None = None
) -> QuerySet[Doctor]:
    doctors = visible_doctors(client)
    if branch_id is not None:
        # Only through a visible branch: filtering by a hidden one must not list who works there.
        doctors = doctors.filter(branches__in=_doctor_branches(client).filter(id=branch_id))
    if department:
        try:
            doctors = doctors.filter(department_id=uuid.UUID(department))
        except ValueError:
            doctors = doctors.filter(department__name__iexact=department)
    return doctors.select_related("department").prefetch_related("branches").order_by("name", "id")


def doctor_get(*, client: ApiClient, doctor_id: str) -> Doctor:
    """404 for an unknown id, a malformed one, or a doctor at no branch the client may see."""
    try:
        key = uuid.UUID(doctor_id)
    except ValueError:
        raise NotFound(f"No doctor {doctor_id!r}.") from None
    # visible_doctors' rule, read with two precompiled statements (every booking and slot query runs them):
    # an active doctor working at an active branch the client may see.
    found = _DOCTOR.fetch(doctor=key)
    if not found:
        raise NotFound(f"No doctor {doctor_id!r}.")
    doctor = found[0]
    branches = _DOCTOR_BRANCHES.fetch(doctor=key)
    allowed = client_branch_ids(client)
    if not any(b.is_active and (allowed is None or b.id in allowed) for b in branches):
        raise NotFound(f"No doctor {doctor_id!r}.")
    prefetched(doctor, "branches", branches)
    return doctor


_DOCTOR = QueryPlan(
    lambda: Doctor.objects.select_related("department").filter(id=Slot("doctor", UUIDField()), is_active=True)
)
# In the branches' own order, as prefetch_related("branches") gives them.
_DOCTOR_BRANCHES = QueryPlan(lambda: Branch.objects.filter(doctors__id=Slot("doctor", UUIDField())))


def doctor_branches_visible(*, client: ApiClient, doctor: Doctor) -> list[Branch]:
    allowed = client_branch_ids(client)
    return [b for b in doctor.branches.all() if b.is_active and (allowed is None or b.id in allowed)]
