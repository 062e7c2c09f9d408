"""The branch rule, in one place: every read of branch-owned data starts from `Model.objects.visible_to(client)`.

A client (an API client, later a staff member) limited to some branches sees only rows owned by those
branches; an unrestricted one sees every row. The rule is a filter on the queryset, so a row of another branch
is never loaded and then checked in Python: a detail read of another branch's id finds nothing, exactly as an
unknown id does (docs/api-rules.md §4, no existence oracle). Each branch-owned model declares, on its queryset
class, the path from its rows to the owning branch (`branch_path`); models whose rule is more than one path
(a visit, a doctor) override `visible_to`.

`at_branches(ids)` is the same filter for a read scoped by branches that are not a client's: the HL7 sender's
and the DICOM station's branches (integrations reach it through the owning app's port).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol, Self, TypeVar, cast

from django.db import models

M = TypeVar("M", bound=models.Model)

_BRANCH_IDS = "_clinic_branch_ids"


class BranchRestricted(Protocol):
    """Who reads: anything with a `branches` relation whose emptiness means "every branch" (an ApiClient)."""

    @property
    def branches(self) -> Any: ...


def client_branch_ids(client: BranchRestricted) -> frozenset[uuid.UUID] | None:
    """The branches a client is limited to, or None when it may see every branch (cached per instance,
    i.e. per request, since the client is loaded with the token on every request)."""
    cached = client.__dict__
    if _BRANCH_IDS not in cached:
        ids = frozenset(client.branches.values_list("id", flat=True))
        cached[_BRANCH_IDS] = ids or None
    return cast(frozenset[uuid.UUID] | None, cached[_BRANCH_IDS])


def client_branch_ids_known(client: BranchRestricted, ids: Iterable[uuid.UUID]) -> None:
    """Record the client's branch restriction read with its token (clinic.api.bearer), sparing the query."""
    client.__dict__[_BRANCH_IDS] = frozenset(ids) or None


def reader_branch_ids_fixed(reader: Any, ids: frozenset[uuid.UUID] | None) -> None:
    """Fix a reader's restriction as given, where no branches means none (a staff member, clinic.staff),
    not every branch as for an API client: None alone is unrestricted."""
    reader.__dict__[_BRANCH_IDS] = ids


def client_sees_branch(client: BranchRestricted, branch_id: uuid.UUID | None) -> bool:
    """Whether a branch id the client named (not a loaded row) is one of its branches: for choosing a default
    branch among candidates, never for checking a row after it was loaded."""
    if branch_id is None:
        return False
    allowed = client_branch_ids(client)
    return allowed is None or branch_id in allowed


class BranchScopedQuerySet(models.QuerySet[M]):
    """A queryset of rows that belong to a branch; `branch_path` is the lookup from a row to its branch id."""

    branch_path: ClassVar[str] = "branch_id"

    def visible_to(self, client: BranchRestricted) -> Self:
        allowed = client_branch_ids(client)
        return self.all() if allowed is None else self.at_branches(allowed)

    def at_branches(self, branch_ids: Any) -> Self:
        """Rows of these branches: a collection of ids, or an expression giving them (a subquery, an array)."""
        return self.filter(**{f"{self.branch_path}__in": branch_ids})
