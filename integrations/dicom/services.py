"""Writes on the DICOM worklist's allow-list."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from clinic.models import Branch
from integrations.dicom.models import DicomCallingAE


@transaction.atomic
def calling_ae_save(
    *,
    ae_title: str,
    branch: Branch,
    networks: list[str] | None = None,
    any_address: bool = False,
    description: str = "",
) -> tuple[DicomCallingAE, bool]:
    """Allow `ae_title` (active) for `branch` from `networks` (addresses or CIDR networks), or from any address
    when `any_address` is chosen explicitly; creating or updating its entry. ValidationError naming the bad
    field: a title bound to no address at all is refused (an AE title is easy to forge). Returns the entry and
    whether it is new."""
    title = ae_title.strip()
    addresses = [network.strip() for network in networks or [] if network.strip()]
    if not addresses and not any_address:
        raise ValidationError(
            {"networks": ["Give the addresses the modality connects from, or choose any address explicitly."]}
        )
    entry = DicomCallingAE.objects.select_for_update().filter(ae_title=title).first()
    created = entry is None
    if entry is None:
        entry = DicomCallingAE(ae_title=title)
    entry.branch = branch
    entry.networks = list(dict.fromkeys(addresses))
    entry.any_address = any_address
    entry.description = description
    entry.active = True
    entry.full_clean()
    entry.save()
    return entry, created
