"""A small lab catalogue for the API tests: a CBC with one analyte and its bands, a coded blood group
without a billing item, a chest X-ray, and an inactive test the list never shows. Idempotent."""

from __future__ import annotations

from decimal import Decimal

from billing.models import BillableService
from clinic.models import Department
from lab.models import Analyte, LabTest, ReferenceRange


def seed_catalogue() -> dict[str, LabTest]:
    lab = Department.objects.get_or_create(name="Laboratory")[0]
    radiology = Department.objects.get_or_create(name="Radiology")[0]
    cbc_item = BillableService.objects.get_or_create(
        code="LAB-CBC",
        defaults={"name": "CBC", "department": lab, "rate": Decimal("350.00"), "hsn_sac": "999316"},
    )[0]
    xr_item = BillableService.objects.get_or_create(
        code="RAD-XR-CHEST",
        defaults={"name": "Chest X-ray", "department": radiology, "rate": Decimal("500.00"), "hsn_sac": "999316"},
    )[0]
    cbc, created = LabTest.objects.get_or_create(
        code="CBC",
        defaults={
            "name": "Complete blood count",
            "loinc_code": "58410-2",
            "kind": "lab",
            "specimen_type": "Whole blood (EDTA)",
            "billable_service": cbc_item,
        },
    )
    if created:
        hgb = Analyte.objects.create(
            test=cbc,
            code="HGB",
            loinc_code="718-7",
            name="Hemoglobin",
            unit="g/dL",
            critical_low=Decimal("7"),
            critical_high=Decimal("20.5"),
        )
        ReferenceRange.objects.create(
            analyte=hgb, sex="male", age_min_days=6570, low=Decimal("13.5"), high=Decimal("17.5")
        )
        ReferenceRange.objects.create(
            analyte=hgb, sex="any", age_min_days=365, age_max_days=6570, low=Decimal("11.5"), high=Decimal("15.5")
        )
        ReferenceRange.objects.create(analyte=hgb, sex="female", age_min_days=6570, low=Decimal("12.0"), high=None)
    group, created = LabTest.objects.get_or_create(
        code="BLOOD-GROUP",
        defaults={"name": "Blood group", "loinc_code": "882-1", "kind": "lab", "specimen_type": "Whole blood (EDTA)"},
    )
    if created:
        Analyte.objects.create(
            test=group,
            code="ABO",
            loinc_code="883-9",
            name="ABO group",
            value_type="coded",
            coded_values=["A", "B", "AB", "O"],
        )
    xr = LabTest.objects.get_or_create(
        code="XR-CHEST",
        defaults={
            "name": "XR Chest 2 views",
            "loinc_code": "36643-5",
            "kind": "imaging",
            "modality": "XR",
            "billable_service": xr_item,
        },
    )[0]
    old = LabTest.objects.get_or_create(
        code="AAA-OLD",
        defaults={
            "name": "Withdrawn test",
            "loinc_code": "2093-3",
            "kind": "lab",
            "specimen_type": "Serum",
            "active": False,
        },
    )[0]
    return {"CBC": cbc, "BLOOD-GROUP": group, "XR-CHEST": xr, "AAA-OLD": old}
