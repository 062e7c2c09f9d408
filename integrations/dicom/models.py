"""Who may talk to the DICOM worklist: the calling AE titles allowed, each for one branch."""

from __future__ import annotations

import uuid

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from clinic.models import Branch

# A DICOM AE title: 1 to 16 characters of the default repertoire, no backslash nor control characters, not
# starting with a space (trailing spaces are padding and stripped).
AE_TITLE_PATTERN = r"^[!-Z^-~][ -Z^-~]{0,15}$"


class DicomCallingAE(models.Model):
    """A modality (or any DICOM client) allowed to associate with the worklist: its calling AE title, the
    branch whose scheduled items it sees and whose procedures it reports, and optionally the only address it
    may connect from. Any other calling AE title is rejected at association."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    ae_title = models.CharField(
        "AE title",
        max_length=16,
        unique=True,
        validators=[RegexValidator(AE_TITLE_PATTERN, "1 to 16 printable ASCII characters, no backslash.")],
    )
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="dicom_calling_aes")
    host = models.GenericIPAddressField(
        null=True, blank=True, help_text="If set, associations under this title are accepted from this address only."
    )
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True, help_text="e.g. Room 2 CT scanner.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["ae_title"]
        verbose_name = "DICOM calling AE title"
        constraints = [
            models.CheckConstraint(condition=Q(ae_title__regex=AE_TITLE_PATTERN), name="dicomcallingae_title_format"),
        ]

    def __str__(self) -> str:
        return self.ae_title
