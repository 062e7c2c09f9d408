"""Factories and a small world for the lab order tests: two branches (the client sees BLR only), a doctor
at BLR, a patient, a lab test (CBC, billable), an imaging test (XR-CHEST, billable) and an unbillable test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import factory

from lab import services
from lab.models import Analyte, LabOrder, LabTest, Priority, TestKind
from tests.billing.factories import BillableServiceFactory
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.patients.factories import PatientFactory

ORDERS = "/api/v1/lab/orders"


class LabTestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LabTest
        django_get_or_create = ("code",)

    code = factory.Sequence(lambda n: f"T{n:04d}")
    name = factory.Sequence(lambda n: f"Test {n}")
    loinc_code = "58410-2"
    kind = TestKind.LAB
    specimen_type = "Whole blood"
    modality = ""


class AnalyteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Analyte

    test = factory.SubFactory(LabTestFactory)
    code = factory.Sequence(lambda n: f"A{n:03d}")
    loinc_code = "718-7"
    name = factory.Sequence(lambda n: f"Analyte {n}")
    unit = "g/dL"


def imaging_test(**kwargs: Any) -> LabTest:
    defaults: dict[str, Any] = {
        "kind": TestKind.IMAGING,
        "specimen_type": "",
        "modality": "XR",
        "loinc_code": "36643-5",
    }
    return LabTestFactory(**{**defaults, **kwargs})


@dataclass
class LabWorld:
    blr: Any
    mum: Any
    department: Any
    doctor: Any
    mum_doctor: Any
    patient: Any
    cbc: LabTest
    xray: LabTest
    unbilled: LabTest
    writer: str  # lab:write, BLR only
    reader: str  # lab:read, BLR only

    def order(self, tests: list[LabTest] | None = None, **kwargs: Any) -> LabOrder:
        """An order through the service at BLR."""
        values: dict[str, Any] = {
            "branch": self.blr,
            "patient": self.patient,
            "doctor": self.doctor,
            "tests": tests or [self.cbc],
            "priority": Priority.ROUTINE,
            "ordered_by": "test",
        }
        return services.lab_order_create(**{**values, **kwargs})


def make_lab_world(token_for: Callable[..., str]) -> LabWorld:
    blr = BranchFactory(code="BLR", name="Bengaluru Central Clinic", state="Karnataka", time_zone="Asia/Kolkata")
    mum = BranchFactory(code="MUM", name="Mumbai Andheri Hospital", state="Maharashtra", time_zone="Asia/Kolkata")
    department = DepartmentFactory(name="Pathology")
    doctor = DoctorFactory(name="Dr. Anil Rao", department=department, branches=[blr])
    mum_doctor = DoctorFactory(name="Dr. Meera Shah", department=department, branches=[mum])
    patient = PatientFactory(first_name="Priya", last_name="Sharma", address_state="Karnataka", registration_branch=blr)
    cbc_service = BillableServiceFactory(
        code="LAB-CBC",
        name="Complete blood count",
        department=department,
        rate=Decimal("350.00"),
        tax_rate=Decimal("0.00"),
        tax_category="exempt",
        hsn_sac="999316",
    )
    xray_service = BillableServiceFactory(
        code="IMG-XR-CHEST",
        name="Chest X-ray",
        department=department,
        rate=Decimal("600.00"),
        tax_rate=Decimal("0.00"),
        tax_category="exempt",
        hsn_sac="999316",
    )
    cbc = LabTestFactory(code="CBC", name="Complete blood count", billable_service=cbc_service)
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray PA view", billable_service=xray_service)
    unbilled = LabTestFactory(code="ESR", name="Erythrocyte sedimentation rate", loinc_code="4537-7")
    return LabWorld(
        blr=blr,
        mum=mum,
        department=department,
        doctor=doctor,
        mum_doctor=mum_doctor,
        patient=patient,
        cbc=cbc,
        xray=xray,
        unbilled=unbilled,
        writer=token_for(["lab:write"], branches=[blr]),
        reader=token_for(["lab:read"], branches=[blr]),
    )
