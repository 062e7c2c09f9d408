"""The patients app's domain errors; the generic ones (NotFound, Conflict, InvalidState, FieldError) are in
clinic.errors."""

from __future__ import annotations

from clinic.errors import Conflict


class DuplicatePatient(Conflict):
    """409: registering (or changing a patient into) a second active record of one person."""

    code = "duplicate_patient"
    title = "Duplicate patient"
    description = "An active patient has the same phone and date of birth; see existing_patient_id and existing_id."
