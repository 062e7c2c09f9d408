"""Staff users as readers of branch-scoped rows: the admin's side of the branch rule (clinic.visibility).

A staff member is limited to the branches of their StaffProfile; an account with none sees no branch's rows
unless it is marked network-wide (superusers included: docs/staff.md). Every admin list, page, search,
action, export, count and dashboard reads through `staff_reader(user)` with the same `visible_to` method the
API's selectors use, so both doors apply one rule.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet

from clinic.models import Branch, StaffProfile
from clinic.visibility import reader_branch_ids_fixed

_READER = "_clinic_staff_reader"


class StaffReader:
    """A staff user seen as a reader: `branches` as an ApiClient has, with the restriction fixed at creation."""

    def __init__(self, user: Any, branch_ids: frozenset[uuid.UUID] | None) -> None:
        self.user = user
        self.branch_ids = branch_ids
        reader_branch_ids_fixed(self, branch_ids)

    @property
    def branches(self) -> QuerySet[Branch]:
        if self.branch_ids is None:
            return Branch.objects.all()
        return Branch.objects.filter(id__in=self.branch_ids)

    @property
    def network_wide(self) -> bool:
        return self.branch_ids is None

    def sees_nothing(self) -> bool:
        return self.branch_ids is not None and not self.branch_ids


def staff_branch_ids(user: Any) -> frozenset[uuid.UUID] | None:
    """None for a network-wide account; otherwise the ids of its branches (empty: it sees nothing)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return frozenset()
    profile = StaffProfile.objects.filter(user_id=user.pk).first()
    if profile is None:
        return frozenset()
    if profile.network_wide:
        return None
    return frozenset(profile.branches.values_list("id", flat=True))


def staff_reader(user: Any) -> StaffReader:
    """The user's reader, read once per request: the request's user object carries it."""
    cached = user.__dict__.get(_READER)
    if cached is None:
        cached = StaffReader(user, staff_branch_ids(user))
        user.__dict__[_READER] = cached
    return cached


def visible_to_staff(queryset: QuerySet[Any], user: Any) -> QuerySet[Any]:
    """`queryset` as `user` may see it: the model's own branch rule, or unchanged for a model no branch owns
    (catalogues and configuration: drugs, tests, departments, integrations)."""
    reader = staff_reader(user)
    if reader.network_wide:
        return queryset
    if hasattr(queryset, "visible_to"):
        return queryset.visible_to(reader)
    path = branch_path_of(queryset.model)
    if path is None:
        return queryset
    return queryset.filter(**{f"{path}__in": reader.branch_ids})


# Branch-owned models without a BranchScopedQuerySet (nothing outside the admin reads them by client).
_EXTRA_BRANCH_PATHS = {
    "pharmacy.stockmovement": "batch__branch_id",
    "pharmacy.dispensereturn": "dispense__branch_id",
    "pharmacy.dispensereturnline": "dispense_return__dispense__branch_id",
    "billing.creditnoteline": "credit_note__branch_id",
    "appointments.appointmentchange": "appointment__branch_id",
}


def branch_path_of(model: type[Any]) -> str | None:
    """The lookup from a row of `model` to its owning branch, or None when no branch owns it."""
    label = model._meta.label_lower
    if label in _EXTRA_BRANCH_PATHS:
        return _EXTRA_BRANCH_PATHS[label]
    names = {field.name for field in model._meta.get_fields()}
    return "branch_id" if "branch" in names and model is not Branch else None
