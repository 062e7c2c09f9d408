"""Who may talk to the DICOM worklist: the calling AE titles allowed, each for one branch."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from clinic.models import Branch
from integrations.hl7.models import validate_networks

# A DICOM AE title: 1 to 16 characters of the default repertoire, no backslash nor control characters, not
# starting with a space (trailing spaces are padding and stripped).
AE_TITLE_PATTERN = r"^[!-Z^-~][ -Z^-~]{0,15}$"


class DicomCallingAE(models.Model):
    """A modality (or any DICOM client) allowed to associate with the worklist: its calling AE title, the
    branch whose scheduled items it sees and whose procedures it reports, and the addresses it may connect
    from. Any other calling AE title, or this one from another address, is rejected at
    association. `any_address` lifts the address check; it must be chosen explicitly and the admin flags it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    ae_title = models.CharField(
        "AE title",
        max_length=16,
        unique=True,
        validators=[RegexValidator(AE_TITLE_PATTERN, "1 to 16 printable ASCII characters, no backslash.")],
    )
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="dicom_calling_aes")
    networks = ArrayField(
        models.CharField(max_length=50),
        default=list,
        blank=True,
        validators=[validate_networks],
        help_text="IP addresses or networks (CIDR) the modality connects from, e.g. 10.1.2.3 or 10.1.2.0/24.",
    )
    any_address = models.BooleanField(
        default=False, help_text="Accept this AE title from any address (not recommended: a title is easy to forge)."
    )
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True, help_text="e.g. Room 2 CT scanner.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["ae_title"]
        verbose_name = "DICOM calling AE title"
        constraints = [
            models.CheckConstraint(condition=Q(ae_title__regex=AE_TITLE_PATTERN), name="dicomcallingae_title_format"),
            models.CheckConstraint(
                condition=Q(any_address=True) | ~Q(networks=[]), name="dicomcallingae_networks_or_any_address"
            ),
        ]

    def __str__(self) -> str:
        return self.ae_title
