"""patients.selectors.patient_get and patient_profile find the patient a reference names with one constant
statement (`_patient_named`); each must find exactly whom the ORM read it stands for finds (`_one` over
visible_patients: Patient.objects.visible_to, then the merge followed; for the profile, over `_with_profile`,
its annotations and branch) and load the same row, encrypted fields included, for every kind of reference and
client: UUID text in either case, business id in any case with or
without hyphens, non-ASCII digits, unknown; unrestricted, restricted to the patient's branch or elsewhere; a
patient merged into a visible survivor and into one the client cannot see."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import date
from typing import Any

import pytest
from django.contrib.postgres.fields import ArrayField
from django.db.models import QuerySet, TextField, UUIDField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Replace, Upper
from django.forms.models import model_to_dict
from django.utils import timezone

from clinic.errors import NotFound
from clinic.text import has_non_ascii_digit
from patients.identifiers import normalise_patient_ref
from patients.models import Diagnosis, Patient
from patients.selectors import _MERGED_IDS, _SECTIONS, patient_get, patient_profile, visible_patients
from patients.services import patient_merge
from tests.factories import ApiClientFactory, BranchFactory
from tests.patients.factories import (
    AllergyFactory,
    DiagnosisFactory,
    InsuranceFactory,
    MedicationFactory,
    PatientFactory,
)

pytestmark = pytest.mark.django_db


# --- The ORM reads the statements stand for (they were the selectors' code before the statements)


def _by_ref(patients: QuerySet[Patient], ref: str) -> QuerySet[Patient]:
    """Filter by UUID or by business patient_id (case and hyphens ignored, via its expression index).
    A reference with non-ASCII digits names nobody: uuid.UUID would read Arabic-Indic digits as hex digits."""
    if has_non_ascii_digit(ref):
        return patients.none()
    try:
        return patients.filter(id=uuid.UUID(ref))
    except ValueError:
        return patients.alias(patient_id_key=Upper(Replace("patient_id", Value("-"), Value("")))).filter(
            patient_id_key=normalise_patient_ref(ref)
        )


def _one(patients: QuerySet[Patient], ref: str | uuid.UUID) -> Patient | None:
    """The patient `ref` names among `patients` (UUID, else business patient_id); a merged record resolves
    to the one that survived, if that one is among `patients` too."""
    patient = (patients.filter(id=ref) if isinstance(ref, uuid.UUID) else _by_ref(patients, ref)).first()
    if patient is not None and patient.merged_into_id is not None:
        patient = patients.filter(id=patient.merged_into_id).first()
    return patient


def _with_profile(patients: QuerySet[Patient], today: date) -> QuerySet[Patient]:
    """The patients with their branch and the profile's annotations: the small sections (as of `today`) and
    the ids of the records merged into each."""
    sections = RawSQL(  # noqa: S611 - fixed SQL; the date is a parameter
        _SECTIONS, [Diagnosis.Status.ACTIVE, today], output_field=TextField()
    )
    merged_ids = RawSQL(_MERGED_IDS, [], output_field=ArrayField(UUIDField()))  # noqa: S611 - fixed SQL
    return patients.select_related("registration_branch").annotate(sections=sections, merged_ids=merged_ids)


# ---


def fields(patient: Patient | None) -> dict[str, Any] | None:
    if patient is None:
        return None
    return {**model_to_dict(patient), "pk": patient.pk, "db": patient._state.db, "adding": patient._state.adding}


def orm_read(client: Any, ref: Any) -> Patient | None:
    return _one(visible_patients(client), ref)


def test_the_statement_finds_and_loads_what_the_orm_read_does():
    blr, mum = BranchFactory(code="BLR"), BranchFactory(code="MUM")
    plain = PatientFactory(registration_branch=blr, patient_id="PAT-000101", national_id="234567890124")
    survivor = PatientFactory(registration_branch=blr, patient_id="PAT-000102")
    merged_here = PatientFactory(registration_branch=blr, patient_id="PAT-000103")
    elsewhere = PatientFactory(registration_branch=mum, patient_id="PAT-000104")
    merged_away = PatientFactory(registration_branch=blr, patient_id="PAT-000105")
    for patient in (plain, survivor, merged_here):  # sections of its own, and the merged record's for survivor
        InsuranceFactory(patient=patient)
        DiagnosisFactory(patient=patient)
        AllergyFactory(patient=patient)
        MedicationFactory(patient=patient)
    patient_merge(source=merged_here, target=survivor, by="test", reason="Duplicate")
    patient_merge(source=merged_away, target=elsewhere, by="test", reason="Duplicate")
    refs: list[str] = [str(uuid.uuid4()), "PAT-999999", "PAT-\u0660\u0660\u0660\u0661\u0660\u0661", "pat 000101", ""]
    for patient in (plain, merged_here, elsewhere, merged_away):
        refs += [str(patient.id), str(patient.id).upper(), patient.patient_id]
        refs += [patient.patient_id.lower(), patient.patient_id.replace("-", ""), f"-{patient.patient_id}-"]
    clients = [ApiClientFactory(branches=chosen) for chosen in ([], [blr], [mum], [blr, mum])]

    outcomes = {"found": 0, "not found": 0}
    for client, ref in itertools.product(clients, refs):
        expected = orm_read(client, ref)
        if expected is not None and expected.merged_into_id is not None:
            expected = visible_patients(client).filter(id=expected.merged_into_id).first()
        if expected is None:
            with pytest.raises(NotFound):
                patient_get(client=client, ref=ref)
            with pytest.raises(NotFound):
                patient_profile(client=client, ref=ref)
            outcomes["not found"] += 1
            continue
        got = patient_get(client=client, ref=ref)
        assert fields(got) == fields(expected), (client.branches.all(), ref)
        profiled: Any = _one(_with_profile(visible_patients(client), timezone.localdate()), ref)
        profile = patient_profile(client=client, ref=ref)
        assert fields(profile.patient) == fields(profiled)
        assert fields(profile.patient.registration_branch) == fields(profiled.registration_branch)
        assert profile.patient.merged_ids == profiled.merged_ids
        assert profile.sections == json.loads(profiled.sections)
        outcomes["found"] += 1
    assert min(outcomes.values()) >= 30, outcomes  # the matrix holds both outcomes, not only one
    assert plain.national_id_encrypted
    assert patient_get(client=clients[0], ref="PAT-000101").national_id_last4 == "0124"
    sections = patient_profile(client=clients[0], ref="PAT-000102").sections
    assert [len(sections[name]) for name in ("insurance", "diagnoses", "allergies", "medications")] == [1, 2, 2, 2]
