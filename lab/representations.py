"""The lab response bodies (docs/api-rules.md §13): one TypedDict per shape, named as its OpenAPI component
(clinic.api.shapes derives the component from it), and the functions that build them.

Quantities (range limits, critical limits) leave as exact JSON numbers without trailing zeros (13.5, not
13.5000); ids as UUID objects, which the renderer writes as their text.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Annotated, TypedDict
from zoneinfo import ZoneInfo

from clinic.lib.shapes import Deprecated, Doc, Format, Number
from lab import models

# --- Catalogue ---------------------------------------------------------------------------------------------

# The catalogue columns' precision (lab.models: 12 digits, 4 places).
Quantity = Number(max_digits=12, decimal_places=4)


def plain_quantity(value: Decimal | None) -> Decimal | None:
    """13.5000 -> 13.5 and 100.0000 -> 100 (never 1E+2): a stored quantity (4 places) as it was reported."""
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
        "low": plain_quantity(band.low),
        "high": plain_quantity(band.high),
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
        "critical_low": plain_quantity(analyte.critical_low),
        "critical_high": plain_quantity(analyte.critical_high),
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


# --- Orders

ResultValue = Annotated[Decimal | None, Number(max_digits=14, decimal_places=4)]
Limit = Annotated[Decimal | None, Number(max_digits=12, decimal_places=4)]


class LabOrderPatient(TypedDict):
    id: Annotated[str, Format.UUID]
    patient_id: Annotated[str, Doc("The patient's business id.")]
    name: str


class LabOrderDoctor(TypedDict):
    id: Annotated[str, Format.UUID]
    name: str


class LabOrderTest(TypedDict):
    code: str
    name: str
    loinc_code: Annotated[str, Doc("The test's LOINC code, as the catalogue names it (HL7 ORM OBR-4 carries it).")]
    kind: Annotated[str, models.TestKind]


class LabResultAnalyte(TypedDict):
    code: str
    name: str


class LabResultVersion(TypedDict):
    """One version of a result: a quantity (`value_quantity`, with its unit) or text (`value_text`; an imaging
    report is text without an analyte)."""

    id: Annotated[str, Format.UUID]
    result_id: Annotated[str, Format.UUID, Deprecated("id")]
    version: int
    status: Annotated[str, models.ResultStatus]
    value_quantity: ResultValue
    comparator: Annotated[
        str | None, Doc("<, <=, > or >= before value_quantity (a laboratory's `>14`); null when it is the value.")
    ]
    value_quantity_high: Annotated[ResultValue, Doc("The high end when the laboratory reported a range (10-20).")]
    value_text: str | None
    unit: str | None
    flag: Annotated[str | None, Doc("N, L, H, LL or HH; null when no range applies.")]
    reference_low: Limit
    reference_high: Limit
    reported_range: Annotated[str | None, Doc("The performing laboratory's own reference range, as it sent it.")]
    reported_flag: Annotated[str | None, Doc("The performing laboratory's own abnormal flag, as it sent it.")]
    note: str | None
    reason: Annotated[str | None, Doc("Why an amended version replaced the one before.")]
    performed_at: Annotated[str, Format.DATE_TIME]
    performer: str
    recorded_at: Annotated[str, Format.DATE_TIME]


class LabOrderResult(TypedDict):
    """The current version of the result of one analyte (or the imaging report) with its earlier versions."""

    analyte: Annotated[LabResultAnalyte | None, Doc("Null for an imaging report.")]
    current: LabResultVersion
    history: Annotated[list[LabResultVersion], Doc("Earlier versions, oldest first.")]


class LabOrderItem(TypedDict):
    id: Annotated[str, Format.UUID]
    item_id: Annotated[str, Format.UUID, Deprecated("id")]
    test: LabOrderTest
    accession_number: Annotated[str, Doc("Per branch and year, e.g. BLR-26-0000123.")]
    status: Annotated[str, models.ItemStatus]
    modality: Annotated[str | None, Doc("Imaging items: the DICOM modality; null for lab items.")]
    study_instance_uid: Annotated[
        str | None,
        Doc(
            "Imaging items: the DICOM Study Instance UID the worklist, the HL7 order and the images share; "
            "null for lab items."
        ),
    ]
    specimen_type: Annotated[str | None, Doc("Lab items; null for imaging items.")]
    results: Annotated[list[LabOrderResult], Doc("Empty until results are recorded.")]


class LabOrder(TypedDict):
    """A lab or imaging order, as the API returns it and the lab order events carry it."""

    id: Annotated[str, Format.UUID]
    order_id: Annotated[str, Format.UUID, Deprecated("id")]
    order_number: Annotated[str, Doc("Per branch and calendar year, gap-free: BLR-LAB-2026-000123.")]
    status: Annotated[str, models.OrderStatus]
    priority: Annotated[str, models.Priority]
    patient: LabOrderPatient
    doctor: LabOrderDoctor
    branch_id: Annotated[str, Format.UUID]
    appointment_id: Annotated[str | None, Format.UUID]
    clinical_notes: str
    invoice_id: Annotated[str | None, Format.UUID, Doc("The draft invoice the tests were billed on (bill: true).")]
    items: list[LabOrderItem]
    created_at: Annotated[str, Format.DATE_TIME, Doc("With the branch's UTC offset.")]
    collected_at: Annotated[str | None, Format.DATE_TIME]
    cancelled_at: Annotated[str | None, Format.DATE_TIME]
    cancellation_reason: str | None


def _local(value: datetime, zone: ZoneInfo) -> str:
    return value.astimezone(zone).isoformat()


def _local_or_none(value: datetime | None, zone: ZoneInfo) -> str | None:
    return _local(value, zone) if value else None


def _result_version(result: models.LabResult, zone: ZoneInfo) -> LabResultVersion:
    return {
        "id": str(result.id),
        "result_id": str(result.id),
        "version": result.version,
        "status": result.status,
        "value_quantity": result.value_quantity,
        "comparator": result.comparator or None,
        "value_quantity_high": result.value_quantity_high,
        "value_text": result.value_text or None,
        "unit": result.unit or None,
        "flag": result.flag or None,
        "reference_low": result.reference_low,
        "reference_high": result.reference_high,
        "reported_range": result.reported_range or None,
        "reported_flag": result.reported_flag or None,
        "note": result.note or None,
        "reason": result.reason or None,
        "performed_at": _local(result.performed_at, zone),
        "performer": result.performer,
        "recorded_at": _local(result.recorded_at, zone),
    }


def _item_results(item: models.LabOrderItem, zone: ZoneInfo) -> list[LabOrderResult]:
    """Current versions in analyte order (the analyte's position), each with its earlier versions; reads the
    item's prefetched `results` (lab.selectors orders them by analyte position and version)."""
    by_analyte: dict[object, list[models.LabResult]] = {}
    for result in item.results.all():
        by_analyte.setdefault(result.analyte_id, []).append(result)
    shown: list[LabOrderResult] = []
    for versions in by_analyte.values():
        current = next((r for r in versions if r.current), versions[-1])
        analyte = current.analyte
        shown.append(
            {
                "analyte": {"code": analyte.code, "name": analyte.name} if analyte is not None else None,
                "current": _result_version(current, zone),
                "history": [_result_version(r, zone) for r in versions if r.pk != current.pk],
            }
        )
    return shown


def _item(item: models.LabOrderItem, zone: ZoneInfo) -> LabOrderItem:
    test = item.test
    imaging = test.kind == models.TestKind.IMAGING
    return {
        "id": str(item.id),
        "item_id": str(item.id),
        "test": {"code": test.code, "name": test.name, "loinc_code": test.loinc_code, "kind": test.kind},
        "accession_number": item.accession_number,
        "status": item.status,
        "modality": test.modality or None,
        "study_instance_uid": item.study_instance_uid if imaging else None,
        "specimen_type": test.specimen_type or None,
        "results": _item_results(item, zone),
    }


def lab_order_representation(order: models.LabOrder) -> LabOrder:
    """The order with its items and their results; expects what lab.selectors loads (branch, patient, doctor,
    items with their tests and results)."""
    zone = order.branch.zone
    return {
        "id": str(order.id),
        "order_id": str(order.id),
        "order_number": order.order_number,
        "status": order.status,
        "priority": order.priority,
        "patient": {
            "id": str(order.patient_id),
            "patient_id": order.patient.patient_id,
            "name": order.patient.name,
        },
        "doctor": {"id": str(order.doctor_id), "name": order.doctor.name},
        "branch_id": str(order.branch_id),
        "appointment_id": str(order.appointment_id) if order.appointment_id else None,
        "clinical_notes": order.clinical_notes,
        "invoice_id": str(order.invoice_id) if order.invoice_id else None,
        "items": [_item(item, zone) for item in order.items.all()],
        "created_at": _local(order.created_at, zone),
        "collected_at": _local_or_none(order.collected_at, zone),
        "cancelled_at": _local_or_none(order.cancelled_at, zone),
        "cancellation_reason": order.cancellation_reason or None,
    }
