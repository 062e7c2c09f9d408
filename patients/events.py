"""The patient events (docs/api-rules.md §8): their names, their registration, their payload and their
publication.

Both carry `{"patient": <the profile>}`: the body GET /api/v1/patients/{id} answers (component
PatientProfile), read by the selector that endpoint uses, so the national ID only ever travels masked.
`patient.updated` carries the record as it is after the change, nothing more: no `previous` and no list of
changed fields. The profile is the whole record and small, so an integrator reconciles by replacing what it
holds; and the facts a partial diff would have to name are not in the representation at all (the stored
national ID, the active flag, a merge pointer), so a diff would need a second vocabulary beside the API's.

What counts as a change of the patient is the registration record: demographics, contact, address,
identifiers (insurance included), registration branch, active flag, and a merge into it. Clinical entries
(diagnoses, allergies, medications, visits) are not: they are shown in the profile but written elsewhere
and publish no patient event of their own.

Every module names a patient event by its constant here; the wire names are the values.
"""

from __future__ import annotations

from django.utils import timezone

from integrations.webhooks.events import event_publish
from integrations.webhooks.registry import EventKind, PayloadPart, event_kind_register
from patients import representations, selectors
from patients.models import Patient

PATIENT_REGISTERED = "patient.registered"
PATIENT_UPDATED = "patient.updated"

# The OpenAPI component of the profile (patients.representations.PatientProfile, via clinic.api.shapes).
_PATIENT = PayloadPart("patient", representations.PatientProfile.__name__)

EVENT_KINDS = (
    EventKind(
        PATIENT_REGISTERED,
        label="registered",
        description="A patient was registered.",
        payload=(_PATIENT,),
    ),
    EventKind(
        PATIENT_UPDATED,
        label="updated",
        description=(
            "A patient's record changed (demographics, contact, identifiers, insurance, branch, deactivation, "
            "or another record merged into it); `patient` is the whole profile after the change: replace "
            "what you hold. A merge is published once, for the record that survives."
        ),
        payload=(_PATIENT,),
    ),
)


def events_register() -> None:
    """Called by PatientsConfig.ready()."""
    event_kind_register(*EVENT_KINDS)


def publish(event_type: str, patient: Patient) -> None:
    """Publish `event_type` for `patient` inside the caller's transaction, with its profile as the API shows
    it now (two statements to read it) and its registration branch for the subscriptions' branch filter."""
    profile = selectors.patient_profile_load(patient_id=patient.pk)
    payload = representations.patient_profile(profile, timezone.localdate())  # as the endpoint does
    event_publish(event_type=event_type, payload={"patient": payload}, branch_id=profile.patient.registration_branch_id)
