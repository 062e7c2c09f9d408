"""The lab app's port (CONTRACT section 19, ARCHITECTURE "ports for the channels"): the typed functions the
standard channels (integrations.hl7, integrations.dicom) call to reach laboratory and imaging orders. A
channel imports this module, never lab.models nor a queryset: what it gets back are plain values, and what it
changes goes through the lab services, with the branch of the caller (a registered HL7 sender's branches, a
DICOM calling AE's branch) applied here."""

from __future__ import annotations

# DICOM Modality Worklist and MPPS (integrations.dicom)
from lab.procedures import imaging_procedure_finish, imaging_procedure_start
from lab.selectors import TextMatch, WorklistEntry, WorklistQuery, imaging_worklist

# HL7 v2 results (integrations.hl7): below.

__all__ = [
    "TextMatch",
    "WorklistEntry",
    "WorklistQuery",
    "imaging_procedure_finish",
    "imaging_procedure_start",
    "imaging_worklist",
]
