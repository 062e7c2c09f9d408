"""A patient with something in every section of the clinical record, at BLR, and a little at MUM (which a
BLR-only client must not see). Shared by the record tests and the FHIR tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from lab import services as lab_services
from lab.models import LabOrder, LabTest, Priority, RangeSex, ReferenceRange
from lab.results import ResultInput, lab_results_record
from patients.models import Allergy, Diagnosis, Medication, Visit
from pharmacy.models import Dispense, Prescription
from tests.helpers import IST
from tests.lab.order_factories import AnalyteFactory, LabTestFactory, imaging_test
from tests.patients.factories import AllergyFactory, DiagnosisFactory, VisitFactory
from tests.pharmacy.factories import PharmacyWorld, make_pharmacy_world


@dataclass
class RecordWorld:
    pharmacy: PharmacyWorld
    visit: Visit
    old_visit: Visit
    mum_visit: Visit
    diagnosis: Diagnosis
    past_diagnosis: Diagnosis
    allergy: Allergy
    prescription: Prescription
    dispense: Dispense
    order: LabOrder
    mum_order: LabOrder
    cbc: LabTest
    xray: LabTest

    @property
    def patient(self) -> Any:
        return self.pharmacy.patient

    @property
    def blr(self) -> Any:
        return self.pharmacy.blr

    @property
    def mum(self) -> Any:
        return self.pharmacy.mum

    @property
    def medication(self) -> Medication:
        return Medication.objects.get(patient=self.patient)


def at_ist(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=IST)


def make_record_world(token_for: Callable[..., str]) -> RecordWorld:
    ph = make_pharmacy_world(token_for)
    today = timezone.localdate()
    visit = VisitFactory(
        patient=ph.patient,
        branch=ph.blr,
        doctor=ph.doctor,
        department=ph.department,
        start=at_ist(today - timedelta(days=2), 10, 30),
        end=at_ist(today - timedelta(days=2), 10, 45),
        reason="Fever for five days",
    )
    old_visit = VisitFactory(
        patient=ph.patient,
        branch=ph.blr,
        doctor=ph.doctor,
        department=ph.department,
        start=at_ist(today - timedelta(days=400), 9, 0),
        end=None,
        reason="",
    )
    mum_visit = VisitFactory(
        patient=ph.patient,
        branch=ph.mum,
        doctor=ph.mum_doctor,
        department=ph.department,
        start=at_ist(today - timedelta(days=30), 11, 0),
        reason="Second opinion",
    )
    diagnosis = DiagnosisFactory(
        patient=ph.patient, code="E11.9", description="Type 2 diabetes mellitus", onset_date=date(2021, 6, 1)
    )
    past_diagnosis = DiagnosisFactory(
        patient=ph.patient,
        code="J06.9",
        description="Acute upper respiratory infection",
        onset_date=date(2020, 1, 10),
        status=Diagnosis.Status.RESOLVED,
    )
    allergy = AllergyFactory(patient=ph.patient, substance="Penicillin", reaction="Rash", severity="moderate")

    ph.receive(ph.para, "B2405", 100)
    prescription = ph.prescribe((ph.para, 10))
    dispense = ph.dispense((ph.para, 10), prescription=prescription)

    cbc = LabTestFactory(code="CBC", name="Complete blood count", loinc_code="58410-2")
    hgb = AnalyteFactory(test=cbc, code="HGB", name="Hemoglobin", loinc_code="718-7", unit="g/dL", position=0)
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.ANY, low=Decimal("12"), high=Decimal("15.5"))
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray PA view")
    order = lab_services.lab_order_create(
        branch=ph.blr,
        patient=ph.patient,
        doctor=ph.doctor,
        tests=[cbc, xray],
        priority=Priority.ROUTINE,
        ordered_by="t",
    )
    lab_services.lab_order_collect(order=order)
    performed = timezone.now()
    lab_results_record(
        order=order,
        results=[ResultInput(test="CBC", analyte="HGB", value="10.9", unit="g/dL")],
        performed_at=performed,
        performer="Lab tech",
        status="final",
    )
    lab_results_record(
        order=order,
        results=[ResultInput(test="XR-CHEST", value="No active lung lesion.")],
        performed_at=performed,
        performer="Dr. Radiologist",
        status="final",
    )
    mum_order = lab_services.lab_order_create(
        branch=ph.mum, patient=ph.patient, doctor=ph.mum_doctor, tests=[cbc], priority=Priority.ROUTINE, ordered_by="t"
    )
    lab_services.lab_order_collect(order=mum_order)
    lab_results_record(
        order=mum_order,
        results=[ResultInput(test="CBC", analyte="HGB", value="19", unit="g/dL")],
        performed_at=performed,
        performer="Lab tech",
        status="final",
    )
    order.refresh_from_db()
    prescription.refresh_from_db()
    return RecordWorld(
        pharmacy=ph,
        visit=visit,
        old_visit=old_visit,
        mum_visit=mum_visit,
        diagnosis=diagnosis,
        past_diagnosis=past_diagnosis,
        allergy=allergy,
        prescription=prescription,
        dispense=dispense,
        order=order,
        mum_order=mum_order,
        cbc=cbc,
        xray=xray,
    )
