"""Who is calling: the allow-listed calling AE titles (integrations.dicom.models)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from integrations.dicom.models import DicomCallingAE


@dataclass(frozen=True)
class Caller:
    """An allowed calling AE: the branch whose items it sees, and that branch's time zone (its local days)."""

    ae_title: str
    branch_id: uuid.UUID
    zone: ZoneInfo


def calling_ae_allowed(*, ae_title: str, address: str) -> Caller | None:
    """The active allow-list entry for `ae_title` (trailing padding ignored) connecting from `address`, or
    None: unknown, inactive, its branch closed, or another address than the one configured."""
    entry = (
        DicomCallingAE.objects.filter(ae_title=ae_title.strip(), active=True, branch__is_active=True)
        .select_related("branch")
        .first()
    )
    if entry is None or (entry.host and entry.host != address):
        return None
    return Caller(ae_title=entry.ae_title, branch_id=entry.branch_id, zone=entry.branch.zone)
