"""The representation types agree with the models they show (the document's enums come from them)."""

from __future__ import annotations

from typing import get_args, get_type_hints

from patients.models import Allergy, Patient, Visit
from patients.representations import Gender, PatientAllergy, VisitType


def test_the_enums_of_the_representations_are_the_models_choices():
    severity = get_type_hints(PatientAllergy)["severity"]

    assert list(get_args(Gender)) == Patient.Gender.values
    assert list(get_args(VisitType)) == Visit.Type.values
    assert list(get_args(severity)) == Allergy.Severity.values
