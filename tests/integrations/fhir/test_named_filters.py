"""The apps' named filters that FHIR search parameters become (docs/fhir.md §4): each field narrows to the rows
matching one of its values, None does not narrow, an empty tuple matches nothing, and the fields of one
filter are ANDed; dates are Spans. And the registry names no column of those apps in a search parameter."""

from __future__ import annotations

import ast
import inspect
from datetime import date, timedelta
from typing import Any

import pytest
from django.utils import timezone

from appointments.selectors import AppointmentFilter, appointment_condition, visible_appointments
from clinic.selectors import (
    BranchFilter,
    DoctorFilter,
    branch_condition,
    branch_list,
    doctor_condition,
    visible_doctors,
)
from integrations.fhir import registry
from lab.selectors import ResultFilter, lab_result_condition, visible_lab_results
from patients.selectors import (
    DiagnosisFilter,
    PatientFilter,
    Span,
    diagnosis_condition,
    patient_condition,
    visible_diagnoses,
    visible_patients,
)
from pharmacy.selectors import PrescriptionItemFilter, prescription_item_condition, visible_prescription_items
from tests.appointments.factories import AppointmentFactory
from tests.emr.world import RecordWorld
from tests.patients.factories import DiagnosisFactory

pytestmark = pytest.mark.django_db


def _ids(rows: Any) -> set[Any]:
    return set(rows.values_list("id", flat=True))


def test_lab_results_by_patient_code_and_performed_span(world: RecordWorld, api_client_factory: Any) -> None:
    client = api_client_factory(scopes=["lab:read"])
    results = visible_lab_results(client).filter(analyte__isnull=False)
    every = _ids(results)
    today = timezone.now()

    assert len(every) == 2
    assert _ids(results.filter(lab_result_condition(ResultFilter()))) == every
    assert _ids(results.filter(lab_result_condition(ResultFilter(patient_ids=())))) == set()
    assert _ids(results.filter(lab_result_condition(ResultFilter(patient_ids=(world.patient.id,))))) == every
    assert _ids(results.filter(lab_result_condition(ResultFilter(loinc_codes=("718-7", "1-1"))))) == every
    both = ResultFilter(loinc_codes=("718-7",), statuses=("preliminary",))
    assert _ids(results.filter(lab_result_condition(both))) == set()
    recent = ResultFilter(performed=(Span(start=today - timedelta(hours=1)),))
    assert _ids(results.filter(lab_result_condition(recent))) == every
    outside = ResultFilter(performed=(Span(today - timedelta(hours=1), today + timedelta(hours=1), outside=True),))
    assert _ids(results.filter(lab_result_condition(outside))) == set()
    either = ResultFilter(performed=(Span(end=today - timedelta(days=1)), Span(start=today - timedelta(hours=1))))
    assert _ids(results.filter(lab_result_condition(either))) == every


def test_patient_diagnosis_prescription_and_appointment_filters(world: RecordWorld, api_client_factory: Any) -> None:
    client = api_client_factory(scopes=["patients:read", "emr:read", "pharmacy:read", "appointments:read"])
    other = DiagnosisFactory(patient=world.patient, code="44054006", description="Diabetes", system="SNOMED")
    appointment = AppointmentFactory(patient=world.patient, doctor=world.pharmacy.doctor, branch=world.blr)
    born = world.patient.date_of_birth

    patients = visible_patients(client)
    assert _ids(patients.filter(patient_condition(PatientFilter(born=(Span(born, born + timedelta(days=1)),))))) == {
        world.patient.id
    }
    assert _ids(patients.filter(patient_condition(PatientFilter(name_starts=("pri",), genders=("male",))))) == set()
    assert _ids(patients.filter(patient_condition(PatientFilter(ids=(world.patient.id,), has_abha=True)))) == set()
    assert _ids(patients.filter(patient_condition(PatientFilter(ids=(world.patient.id,), has_abha=False)))) == {
        world.patient.id
    }
    diagnoses = visible_diagnoses(client)
    assert _ids(diagnoses.filter(diagnosis_condition(DiagnosisFilter(icd10=True)))) == {
        world.diagnosis.id,
        world.past_diagnosis.id,
    }
    assert _ids(diagnoses.filter(diagnosis_condition(DiagnosisFilter(icd10=False, systems=("SNOMED",))))) == {other.id}
    since_2021 = DiagnosisFilter(onset=(Span(start=date(2021, 1, 1)),))
    assert world.diagnosis.id in _ids(diagnoses.filter(diagnosis_condition(since_2021)))
    assert world.past_diagnosis.id not in _ids(diagnoses.filter(diagnosis_condition(since_2021)))
    items = visible_prescription_items(client)
    assert len(_ids(items.filter(prescription_item_condition(PrescriptionItemFilter(drug_codes=("PARA500",)))))) == 1
    assert _ids(items.filter(prescription_item_condition(PrescriptionItemFilter(statuses=("active",))))) == set()
    booked = visible_appointments(client).filter(
        appointment_condition(AppointmentFilter(doctor_ids=(world.pharmacy.doctor.id,), statuses=("booked",)))
    )
    assert _ids(booked) == {appointment.id}


def test_doctor_and_branch_filters(world: RecordWorld, api_client_factory: Any) -> None:
    client = api_client_factory(scopes=["appointments:read"])
    doctors = visible_doctors(client)
    doctor = world.pharmacy.doctor
    fragment = doctor.name[1:4].swapcase()

    assert _ids(doctors.filter(doctor_condition(DoctorFilter()))) == _ids(doctors)
    assert _ids(doctors.filter(doctor_condition(DoctorFilter(ids=())))) == set()
    assert doctor.id in _ids(doctors.filter(doctor_condition(DoctorFilter(name_contains=(f" {fragment} ",)))))
    assert _ids(doctors.filter(doctor_condition(DoctorFilter(ids=(doctor.id,), name_contains=("zzz",))))) == set()
    branches = branch_list(client=client)
    blr = world.blr
    assert _ids(branches.filter(branch_condition(BranchFilter(codes=(blr.code.lower(),))))) == {blr.id}
    assert _ids(branches.filter(branch_condition(BranchFilter(states=(blr.state.upper(),))))) >= {blr.id}
    assert _ids(branches.filter(branch_condition(BranchFilter(ids=(blr.id,), codes=("NOPE",))))) == set()
    assert _ids(branches.filter(branch_condition(BranchFilter(name_contains=(blr.name[2:6],))))) >= {blr.id}


def test_the_registry_names_no_column_of_the_apps_in_a_search_parameter() -> None:
    """Search parameters of the apps' types reach their rows through the apps' filters only: no lookup
    string (`a__b`, or a field name the builder is given) inside any `params=` of those types."""
    tree = ast.parse(inspect.getsource(registry))
    owned = {
        "PATIENT",
        "APPOINTMENT",
        "ENCOUNTER",
        "CONDITION",
        "ALLERGY",
        "MEDICATION_REQUEST",
        "MEDICATION_DISPENSE",
        "SERVICE_REQUEST",
        "OBSERVATION",
        "DIAGNOSTIC_REPORT",
        "PRACTITIONER",
        "ORGANIZATION",
        "LOCATION",
    }
    builders_of_columns = {"code_filter", "date_filter", "reference_filter", "id_filter", "_id", "_patient"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in owned for t in node.targets):
            assert isinstance(node.value, ast.Call)
            [params] = [keyword.value for keyword in node.value.keywords if keyword.arg == "params"]
            for inner in ast.walk(params):
                if isinstance(inner, ast.Call) and getattr(inner.func, "id", "") in builders_of_columns:
                    found.append((node.targets[0], ast.unparse(inner)))
    for shared in ("_ITEM_PARAMS", "_BRANCH_PARAMS"):
        shared_params = next(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == shared
        )
        for inner in ast.walk(shared_params):
            if isinstance(inner, ast.Call) and getattr(inner.func, "id", "") in builders_of_columns:
                found.append((shared, ast.unparse(inner)))
            if isinstance(inner, ast.Call) and getattr(inner.func, "id", "") == "Q":
                found.append((shared, ast.unparse(inner)))
    assert found == []
