"""The patients app's port: the typed functions the standard channels (integrations.dicom and the like) call
to read what they need of a patient. A channel imports this module, never patients.models nor a queryset:
what it gets back are plain values."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import CharField, Value

from patients.models import Allergy, Diagnosis

# DICOM Modality Worklist (integrations.dicom): what a modality must know before it scans.


@dataclass(frozen=True)
class ClinicalAlerts:
    """A patient's active diagnoses ("description (code)") and recorded allergies ("substance (severity:
    reaction)"), each in a stable order; records entered in error are left out."""

    medical_alerts: tuple[str, ...] = ()
    allergies: tuple[str, ...] = ()


def clinical_alerts(patient_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, ClinicalAlerts]:
    """The alerts of these patients (by primary key), in one query whatever their number; a patient with
    neither an active diagnosis nor an allergy is absent. For channels that already restricted the patients to
    the caller's branch (a worklist answer's patients)."""
    ids = set(patient_ids)
    if not ids:
        return {}
    text = CharField()
    diagnoses = Diagnosis.objects.filter(
        patient_id__in=ids, status=Diagnosis.Status.ACTIVE, entered_in_error=False
    ).values_list("patient_id", Value("diagnosis", output_field=text), "description", "code", Value("", text))
    allergies = Allergy.objects.filter(patient_id__in=ids, entered_in_error=False).values_list(
        "patient_id", Value("allergy", output_field=text), "substance", "severity", "reaction"
    )
    alerts: dict[uuid.UUID, tuple[list[str], list[str]]] = {}
    for patient_id, kind, name, detail, reaction in diagnoses.union(allergies, all=True):
        medical, allergic = alerts.setdefault(patient_id, ([], []))
        if kind == "diagnosis":
            medical.append(f"{name} ({detail})" if detail else name)
        else:
            allergic.append(f"{name} ({detail}: {reaction})" if reaction else f"{name} ({detail})")
    return {
        patient_id: ClinicalAlerts(medical_alerts=tuple(sorted(medical)), allergies=tuple(sorted(allergic)))
        for patient_id, (medical, allergic) in alerts.items()
    }


__all__ = ["ClinicalAlerts", "clinical_alerts"]
