"""Clinical and financial records are never hard-deleted (docs/api-rules.md §7): the admin offers no
Delete (pages, actions, inline checkboxes), the ORM refuses (PROTECT) and PostgreSQL refuses even raw SQL
(a trigger per table); only the lines of a draft invoice may still be removed."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models.deletion import ProtectedError

from appointments.models import Appointment, AppointmentChange
from billing import services as billing
from billing.models import Invoice, LineItem, Payment
from clinic.records import RecordNotDeletable, deletes_refused
from patients.models import Allergy, Diagnosis, Medication, Patient, Visit
from tests.appointments.factories import AppointmentFactory
from tests.billing.factories import line, make_invoice, pay
from tests.factories import BranchFactory, DepartmentFactory
from tests.patients.factories import (
    AllergyFactory,
    DiagnosisFactory,
    MedicationFactory,
    PatientFactory,
    VisitFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def branch():
    return BranchFactory(code="BLR", state="Karnataka", gstin="29AABCC1234D1Z7")


@pytest.fixture
def patient(branch):
    return PatientFactory(registration_branch=branch)


@pytest.fixture
def records(patient, branch) -> dict[str, Any]:
    """One row of every protected table, all of one patient."""
    appointment = AppointmentFactory(patient=patient, branch=branch)
    change = AppointmentChange.objects.create(
        appointment=appointment, version=1, kind="booked", at=appointment.slot_start, actor="system"
    )
    invoice = make_invoice(branch=branch, patient=patient)
    payment = pay(invoice, "100.00")
    return {
        "patients_patient": patient,
        "patients_visit": VisitFactory(patient=patient),
        "patients_diagnosis": DiagnosisFactory(patient=patient),
        "patients_allergy": AllergyFactory(patient=patient),
        "patients_medication": MedicationFactory(patient=patient),
        "appointments_appointment": appointment,
        "appointments_appointmentchange": change,
        "billing_invoice": invoice,
        "billing_lineitem": invoice.line_items.get(),
        "billing_payment": payment,
    }


def counts() -> dict[str, int]:
    models = [
        Patient,
        Visit,
        Diagnosis,
        Allergy,
        Medication,
        Appointment,
        AppointmentChange,
        Invoice,
        LineItem,
        Payment,
    ]
    return {model._meta.db_table: model.objects.count() for model in models}


# --- the admin ---------------------------------------------------------------------------------------


def test_the_admin_delete_page_of_a_patient_is_forbidden_and_deletes_nothing(admin_client, patient):
    DiagnosisFactory(patient=patient)
    url = f"/admin/patients/patient/{patient.pk}/delete/"

    assert admin_client.get(url).status_code == 403
    assert admin_client.post(url, {"post": "yes"}).status_code == 403

    assert Patient.objects.filter(pk=patient.pk).exists()
    assert patient.diagnoses.count() == 1
    page = admin_client.get(f"/admin/patients/patient/{patient.pk}/change/").content.decode()
    assert f"/admin/patients/patient/{patient.pk}/delete/" not in page


def test_the_patient_page_inlines_have_no_delete_checkbox(admin_client, patient):
    DiagnosisFactory(patient=patient)
    AllergyFactory(patient=patient)
    MedicationFactory(patient=patient)
    VisitFactory(patient=patient)

    page = admin_client.get(f"/admin/patients/patient/{patient.pk}/change/").content.decode()

    for prefix in ("insurance", "diagnoses", "allergies", "medications", "visits"):
        assert f'name="{prefix}-0-DELETE"' not in page
    assert 'name="diagnoses-0-code"' in page  # the rows are shown, only without the checkbox


@pytest.mark.parametrize(
    "changelist",
    [
        "patients/patient",
        "patients/visit",
        "patients/diagnosis",
        "patients/allergy",
        "patients/medication",
        "appointments/appointment",
        "billing/invoice",
        "billing/payment",
        "clinic/recordchange",
    ],
)
def test_no_changelist_of_records_offers_delete_selected(admin_client, records, changelist):
    response = admin_client.get(f"/admin/{changelist}/")

    assert response.status_code == 200
    assert 'value="delete_selected"' not in response.content.decode()


def test_deleting_a_diagnosis_through_its_admin_page_is_forbidden(admin_client, patient):
    diagnosis = DiagnosisFactory(patient=patient)

    assert admin_client.post(f"/admin/patients/diagnosis/{diagnosis.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Diagnosis.objects.filter(pk=diagnosis.pk).exists()


# --- PostgreSQL -------------------------------------------------------------------------------------

PROTECTED_TABLES = [
    "patients_patient",
    "patients_visit",
    "patients_diagnosis",
    "patients_allergy",
    "patients_medication",
    "appointments_appointment",
    "appointments_appointmentchange",
    "billing_invoice",
    "billing_lineitem",  # of a finalized invoice
    "billing_payment",
]


@pytest.mark.parametrize("table", PROTECTED_TABLES)
def test_postgresql_refuses_a_raw_sql_delete(records, table):
    before = counts()
    row = records[table]

    with pytest.raises(IntegrityError) as refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [row.pk])  # noqa: S608 - table from the list above

    assert refused.value.__cause__.sqlstate == "23001"  # restrict_violation
    assert counts() == before


def test_a_raw_delete_of_every_row_with_a_cascade_is_refused_too(records):
    before = counts()

    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM patients_diagnosis")

    assert counts() == before


# --- the ORM and the domain error ---------------------------------------------------------------------


def test_orm_delete_of_a_patient_with_clinical_records_raises_protected_error_and_changes_nothing(records):
    before = counts()

    with pytest.raises(ProtectedError):
        records["patients_patient"].delete()

    assert counts() == before


def test_a_refused_delete_becomes_a_409_domain_error_not_a_500(records):
    lonely = PatientFactory()  # no records: nothing PROTECTs it, the trigger refuses
    before = counts()

    with pytest.raises(RecordNotDeletable) as protected, deletes_refused():
        records["patients_patient"].delete()
    with pytest.raises(RecordNotDeletable) as triggered, deletes_refused(), transaction.atomic():
        lonely.delete()
    with pytest.raises(RecordNotDeletable), deletes_refused(), transaction.atomic():
        records["patients_diagnosis"].delete()

    assert (protected.value.status, protected.value.code) == (409, "record_not_deletable")
    assert triggered.value.status == 409
    assert "Failing row" not in triggered.value.detail
    assert lonely.patient_id not in triggered.value.detail
    assert counts() == before


# --- draft invoice lines ------------------------------------------------------------------------------


def test_the_lines_of_a_draft_invoice_can_still_be_replaced_and_removed(branch, patient):
    department = DepartmentFactory()
    draft = make_invoice(branch=branch, patient=patient, department=department, finalize=False)
    old_line = draft.line_items.get()

    billing.invoice_update(invoice=draft, line_items=[line(department, rate="200.00"), line(department)])
    assert not LineItem.objects.filter(pk=old_line.pk).exists()
    assert draft.line_items.count() == 2

    billing.line_item_remove(line_item=draft.line_items.order_by("position").first())
    assert draft.line_items.count() == 1


def test_the_lines_of_a_finalized_invoice_cannot_be_removed_even_by_raw_sql(branch, patient):
    invoice = make_invoice(branch=branch, patient=patient)

    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM billing_lineitem WHERE invoice_id = %s", [invoice.pk])

    assert invoice.line_items.count() == 1
