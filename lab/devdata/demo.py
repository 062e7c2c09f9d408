"""Demo catalogue for `seed_demo` (docs/operations.md §3): a complete blood count, a lipid panel and a blood
group (lab tests with their analytes, reference ranges by sex and age band, critical limits), a chest X-ray
and a CT (imaging tests), each with its billing catalogue item. Idempotent: what exists is left as it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from billing.models import BillableService
from clinic.models import Department
from lab.models import Analyte, LabTest, Modality, RangeSex, ReferenceRange, TestKind, ValueType

ADULT = 18 * 365  # days: 6570
CHILD = 365  # the child bands start at one year; neonates and infants have no range in the demo


@dataclass(frozen=True)
class Band:
    sex: str
    age_min_days: int
    age_max_days: int | None
    low: str | None
    high: str | None


@dataclass(frozen=True)
class DemoAnalyte:
    code: str
    loinc_code: str
    name: str
    unit: str = ""
    value_type: str = ValueType.QUANTITY
    coded_values: tuple[str, ...] = ()
    critical: tuple[str | None, str | None] = (None, None)
    ranges: tuple[Band, ...] = ()


@dataclass(frozen=True)
class DemoTest:
    code: str
    name: str
    loinc_code: str
    kind: str
    specimen_type: str = ""
    modality: str = ""
    rate: str = "0.00"
    analytes: tuple[DemoAnalyte, ...] = field(default_factory=tuple)


ANY, MALE, FEMALE = RangeSex.ANY, RangeSex.MALE, RangeSex.FEMALE

CATALOGUE: tuple[DemoTest, ...] = (
    DemoTest(
        "CBC",
        "Complete blood count",
        "58410-2",
        TestKind.LAB,
        specimen_type="Whole blood (EDTA)",
        rate="350.00",
        analytes=(
            DemoAnalyte(
                "HGB",
                "718-7",
                "Hemoglobin",
                "g/dL",
                critical=("7", "20"),
                ranges=(
                    Band(ANY, CHILD, ADULT, "11.5", "15.5"),
                    Band(MALE, ADULT, None, "13.5", "17.5"),
                    Band(FEMALE, ADULT, None, "12.0", "15.5"),
                ),
            ),
            DemoAnalyte(
                "WBC",
                "6690-2",
                "Leukocytes",
                "10*3/uL",
                critical=("2", "30"),
                ranges=(Band(ANY, CHILD, ADULT, "5.0", "14.5"), Band(ANY, ADULT, None, "4.0", "11.0")),
            ),
            DemoAnalyte(
                "PLT",
                "777-3",
                "Platelets",
                "10*3/uL",
                critical=("50", "1000"),
                ranges=(Band(ANY, CHILD, None, "150", "450"),),
            ),
            DemoAnalyte(
                "HCT",
                "4544-3",
                "Hematocrit",
                "%",
                critical=("20", "60"),
                ranges=(
                    Band(ANY, CHILD, ADULT, "35", "45"),
                    Band(MALE, ADULT, None, "41", "53"),
                    Band(FEMALE, ADULT, None, "36", "46"),
                ),
            ),
        ),
    ),
    DemoTest(
        "LIPID",
        "Lipid panel",
        "57698-3",
        TestKind.LAB,
        specimen_type="Serum",
        rate="600.00",
        analytes=(
            DemoAnalyte("CHOL", "2093-3", "Cholesterol", "mg/dL", ranges=(Band(ANY, ADULT, None, None, "200"),)),
            DemoAnalyte(
                "TRIG",
                "2571-8",
                "Triglyceride",
                "mg/dL",
                critical=(None, "1000"),
                ranges=(Band(ANY, ADULT, None, None, "150"),),
            ),
            DemoAnalyte(
                "HDL",
                "2085-9",
                "Cholesterol in HDL",
                "mg/dL",
                ranges=(Band(MALE, ADULT, None, "40", None), Band(FEMALE, ADULT, None, "50", None)),
            ),
            DemoAnalyte(
                "LDL",
                "13457-7",
                "Cholesterol in LDL (calculated)",
                "mg/dL",
                ranges=(Band(ANY, ADULT, None, None, "100"),),
            ),
        ),
    ),
    DemoTest(
        "BLOOD-GROUP",
        "ABO and Rh blood group",
        "882-1",
        TestKind.LAB,
        specimen_type="Whole blood (EDTA)",
        rate="150.00",
        analytes=(
            DemoAnalyte("ABO", "883-9", "ABO group", value_type=ValueType.CODED, coded_values=("A", "B", "AB", "O")),
            DemoAnalyte("RH", "10331-7", "Rh type", value_type=ValueType.CODED, coded_values=("Positive", "Negative")),
        ),
    ),
    DemoTest("XR-CHEST", "XR Chest 2 views", "36643-5", TestKind.IMAGING, modality=Modality.XR, rate="500.00"),
    DemoTest("CT-CHEST", "CT Chest", "24627-2", TestKind.IMAGING, modality=Modality.CT, rate="3500.00"),
)

# Diagnostic services by a clinic are healthcare services: exempt, SAC 999316.
SAC_DIAGNOSTICS = "999316"


def _department(name: str) -> Department:
    return Department.objects.filter(name__iexact=name).first() or Department.objects.create(name=name)


def _decimal(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


def _billing_item(spec: DemoTest) -> BillableService:
    lab = spec.kind == TestKind.LAB
    service, _ = BillableService.objects.get_or_create(
        code=f"{'LAB' if lab else 'RAD'}-{spec.code}",
        defaults={
            "name": spec.name,
            "department": _department("Laboratory" if lab else "Radiology"),
            "rate": Decimal(spec.rate),
            "tax_category": "exempt",
            "tax_rate": Decimal(0),
            "hsn_sac": SAC_DIAGNOSTICS,
        },
    )
    return service


def _seed_test(spec: DemoTest) -> LabTest:
    test, _ = LabTest.objects.get_or_create(
        code=spec.code,
        defaults={
            "name": spec.name,
            "loinc_code": spec.loinc_code,
            "kind": spec.kind,
            "specimen_type": spec.specimen_type,
            "modality": spec.modality,
            "billable_service": _billing_item(spec),
        },
    )
    for position, item in enumerate(spec.analytes):
        analyte, _ = Analyte.objects.get_or_create(
            test=test,
            code=item.code,
            defaults={
                "position": position,
                "loinc_code": item.loinc_code,
                "name": item.name,
                "unit": item.unit,
                "value_type": item.value_type,
                "coded_values": list(item.coded_values),
                "critical_low": _decimal(item.critical[0]),
                "critical_high": _decimal(item.critical[1]),
            },
        )
        for band in item.ranges:
            ReferenceRange.objects.get_or_create(
                analyte=analyte,
                sex=band.sex,
                age_min_days=band.age_min_days,
                defaults={"age_max_days": band.age_max_days, "low": _decimal(band.low), "high": _decimal(band.high)},
            )
    return test


def seed_demo_lab() -> dict[str, list[dict[str, Any]]]:
    """Create the demo catalogue where missing; return its manifest entries (`lab_tests`, by code)."""
    codes = [_seed_test(spec).code for spec in CATALOGUE]
    tests = LabTest.objects.filter(code__in=codes).select_related("billable_service").order_by("code")
    return {
        "lab_tests": [
            {
                "id": str(t.id),
                "code": t.code,
                "name": t.name,
                "kind": t.kind,
                "loinc_code": t.loinc_code,
                "specimen_type": t.specimen_type,
                "modality": t.modality,
                "billing_service_code": t.billable_service.code if t.billable_service else None,
            }
            for t in tests
        ]
    }
