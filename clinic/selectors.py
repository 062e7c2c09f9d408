"""Reads of organisation data, restricted to what the calling API client may see."""

from __future__ import annotations

import uuid
from typing import cast

from django.db.models import QuerySet

from clinic.models import Branch
from integrations.models import ApiClient

_BRANCH_IDS = "_clinic_branch_ids"


def client_branch_ids(client: ApiClient) -> frozenset[uuid.UUID] | None:
    """The branches a client is limited to, or None when it may see every branch (cached per instance,
    i.e. per request, since the client is loaded with the token on every request)."""
    if _BRANCH_IDS not in client.__dict__:
        ids = frozenset(client.branches.values_list("id", flat=True))
        client.__dict__[_BRANCH_IDS] = ids or None
    return cast(frozenset[uuid.UUID] | None, client.__dict__[_BRANCH_IDS])


def branch_list(*, client: ApiClient, state: str | None = None) -> QuerySet[Branch]:
    branches = Branch.objects.filter(is_active=True)
    allowed = client_branch_ids(client)
    if allowed is not None:
        branches = branches.filter(id__in=allowed)
    if state:
        branches = branches.filter(state__iexact=state)
    return branches.order_by("code", "id")
