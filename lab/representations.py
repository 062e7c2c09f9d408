"""The lab response bodies (CONTRACT section 14): one TypedDict per shape, named as its OpenAPI component
(clinic.api.shapes derives the component from it), and the functions that build them.

Quantities (range limits, critical limits) leave as exact JSON numbers without trailing zeros (13.5, not
13.5000); ids as UUID objects, which the renderer writes as their text.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Annotated, TypedDict

from clinic.api.shapes import Doc, Number
from lab import models

# --- Catalogue ---------------------------------------------------------------------------------------------

# The catalogue columns' precision (lab.models: 12 digits, 4 places).
Quantity = Number(max_digits=12, decimal_places=4)


def _plain(value: Decimal | None) -> Decimal | None:
    """13.5000 -> 13.5 and 100.0000 -> 100 (never 1E+2)."""
    if value is None:
        return None
    value = value.normalize()
    exponent = value.as_tuple().exponent
    return value.quantize(Decimal(1)) if isinstance(exponent, int) and exponent > 0 else value


class AnalyteReferenceRange(TypedDict):
    """The normal range for one sex (`any`: either) and age band [age_min_days, age_max_days) in days."""

    sex: Annotated[str, models.RangeSex]
    age_min_days: Annotated[int, Doc("Inclusive.")]
    age_max_days: Annotated[int | None, Doc("Exclusive; null: no upper limit.")]
    low: Annotated[Decimal | None, Quantity, Doc("Null: no lower limit.")]
    high: Annotated[Decimal | None, Quantity, Doc("Null: no upper limit.")]


class LabTestAnalyte(TypedDict):
    code: str
    loinc_code: str
    name: str
    unit: Annotated[str | None, Doc("UCUM unit; null when the analyte has none (text and coded values).")]
    value_type: Annotated[str, models.ValueType]
    coded_values: Annotated[list[str], Doc("The allowed values of a coded analyte; empty otherwise.")]
    critical_low: Annotated[Decimal | None, Quantity, Doc("A value below is critical (flag LL).")]
    critical_high: Annotated[Decimal | None, Quantity, Doc("A value above is critical (flag HH).")]
    reference_ranges: list[AnalyteReferenceRange]


class LabTest(TypedDict):
    id: uuid.UUID
    code: Annotated[str, Doc("What an order names in `tests`, e.g. CBC.")]
    name: str
    loinc_code: str
    kind: Annotated[str, models.TestKind]
    specimen_type: Annotated[str | None, Doc("Lab tests: e.g. Whole blood (EDTA); null for imaging.")]
    modality: Annotated[str | None, models.Modality, Doc("Imaging tests (DICOM modality); null for lab tests.")]
    billing_service_code: Annotated[
        str | None, Doc("The billing catalogue item an order with `bill: true` invoices; null if none.")
    ]
    analytes: Annotated[list[LabTestAnalyte], Doc("Lab tests: what a result reports; empty for imaging.")]


def reference_range_data(band: models.ReferenceRange) -> AnalyteReferenceRange:
    return {
        "sex": band.sex,
        "age_min_days": band.age_min_days,
        "age_max_days": band.age_max_days,
        "low": _plain(band.low),
        "high": _plain(band.high),
    }


def analyte_data(analyte: models.Analyte) -> LabTestAnalyte:
    """From an analyte read with its ranges prefetched (lab.selectors.lab_tests)."""
    return {
        "code": analyte.code,
        "loinc_code": analyte.loinc_code,
        "name": analyte.name,
        "unit": analyte.unit or None,
        "value_type": analyte.value_type,
        "coded_values": list(analyte.coded_values),
        "critical_low": _plain(analyte.critical_low),
        "critical_high": _plain(analyte.critical_high),
        "reference_ranges": [reference_range_data(band) for band in analyte.ranges.all()],
    }


def lab_test_data(test: models.LabTest) -> LabTest:
    """From a test read by lab.selectors.lab_tests (billing item joined, analytes and ranges prefetched)."""
    return {
        "id": test.id,
        "code": test.code,
        "name": test.name,
        "loinc_code": test.loinc_code,
        "kind": test.kind,
        "specimen_type": test.specimen_type or None,
        "modality": test.modality or None,
        "billing_service_code": test.billable_service.code if test.billable_service else None,
        "analytes": [analyte_data(analyte) for analyte in test.analytes.all()],
    }
