"""Writes on the DICOM worklist's allow-list."""

from __future__ import annotations

from django.db import transaction

from clinic.models import Branch
from integrations.dicom.models import DicomCallingAE


@transaction.atomic
def calling_ae_save(
    *, ae_title: str, branch: Branch, host: str | None = None, description: str = ""
) -> tuple[DicomCallingAE, bool]:
    """Allow `ae_title` (active) for `branch`, creating or updating its entry; ValidationError naming the bad
    field. Returns the entry and whether it is new."""
    title = ae_title.strip()
    entry = DicomCallingAE.objects.select_for_update().filter(ae_title=title).first()
    created = entry is None
    if entry is None:
        entry = DicomCallingAE(ae_title=title)
    entry.branch = branch
    entry.host = host or None
    entry.description = description
    entry.active = True
    entry.full_clean()
    entry.save()
    return entry, created
