"""Reads of organisation data, restricted to what the calling API client may see."""

from __future__ import annotations

from django.db.models import QuerySet

from clinic.models import Branch
from integrations.models import ApiClient


def client_branch_ids(client: ApiClient) -> set[object] | None:
    """The branches a client is limited to, or None when it may see every branch."""
    cached = getattr(client, "_branch_ids", False)
    if cached is False:
        ids = set(client.branches.values_list("id", flat=True))
        cached = ids or None
        client._branch_ids = cached  # type: ignore[attr-defined]
    return cached


def branch_list(*, client: ApiClient, state: str | None = None) -> QuerySet[Branch]:
    branches = Branch.objects.filter(is_active=True)
    allowed = client_branch_ids(client)
    if allowed is not None:
        branches = branches.filter(id__in=allowed)
    if state:
        branches = branches.filter(state__iexact=state)
    return branches.order_by("code", "id")
