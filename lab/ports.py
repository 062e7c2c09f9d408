"""The lab app's port (docs/hl7-inbound.md, docs/dicom-worklist.md): the typed functions the
standard channels (integrations.hl7, integrations.dicom) call to reach laboratory and imaging orders. A
channel imports this module, never lab.models nor a queryset: what it gets back are plain values, and what it
changes goes through the lab services, with the branch of the caller (a registered HL7 sender's branches, a
DICOM calling AE's branch) applied here."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

# HL7 v2 results (integrations.hl7): the section at the end.
from lab import results as lab_results
from lab import selectors as lab_selectors

# DICOM Modality Worklist and MPPS (integrations.dicom): the query and entry types, the item statuses and
# order priorities the worklist translates (plain string choices), an item's Study Instance UID, the
# worklist read and the procedure steps.
from lab.models import ItemStatus, LabOrder, Priority, TestKind, study_instance_uid
from lab.procedures import imaging_procedure_finish, imaging_procedure_start
from lab.selectors import TextMatch, WorklistEntry, WorklistQuery, imaging_worklist

__all__ = [
    "ItemStatus",
    "OruAnalyte",
    "OruOrderUnknown",
    "OruTarget",
    "Priority",
    "ResultInput",
    "TextMatch",
    "WorklistEntry",
    "WorklistQuery",
    "imaging_procedure_finish",
    "imaging_procedure_start",
    "imaging_worklist",
    "oru_results_apply",
    "oru_target",
    "study_instance_uid",
]


@dataclass(frozen=True)
class OruAnalyte:
    """An analyte of the reported test, as OBX-3 and OBX-5 are matched against it."""

    code: str
    loinc_code: str
    value_type: str  # lab.models.ValueType: quantity, text or coded
    coded_values: tuple[str, ...]


@dataclass(frozen=True)
class OruTarget:
    """The order item an ORU OBR group reports on, with what the message is checked against: the order's
    patient (PID-3) and the test's analytes (OBX-3). `analytes` is empty for an imaging item (a report)."""

    item_id: uuid.UUID
    order_id: uuid.UUID
    test_code: str
    imaging: bool
    patient_id: str
    national_health_id: str
    analytes: tuple[OruAnalyte, ...]


# What an ORU result is: the results service's own input (plain values: codes, a value, a unit, texts).
ResultInput = lab_results.ResultInput


class OruOrderUnknown(LookupError):
    """No such order at the sender's branches (an order elsewhere is answered the same way)."""


def oru_target(
    *,
    branch_ids: Sequence[uuid.UUID],
    accession_numbers: Sequence[str],
    order_numbers: Sequence[str] = (),
    test_identifiers: Sequence[str] = (),
) -> OruTarget | None:
    """The item a laboratory bound to `branch_ids` reports on (lab.selectors.lab_item_for_report: accession
    numbers first, then order numbers with the test's code or LOINC), None when there is none at those
    branches."""
    item = lab_selectors.lab_item_for_report(
        branch_ids=branch_ids,
        accession_numbers=accession_numbers,
        order_numbers=order_numbers,
        test_identifiers=test_identifiers,
    )
    if item is None:
        return None
    imaging = item.test.kind == TestKind.IMAGING
    analytes = [] if imaging else lab_results.lab_order_analytes(item.order_id)
    patient = item.order.patient
    return OruTarget(
        item_id=item.id,
        order_id=item.order_id,
        test_code=item.test.code,
        imaging=imaging,
        patient_id=patient.patient_id,
        national_health_id=patient.national_health_id or "",
        analytes=tuple(
            OruAnalyte(
                code=analyte.code,
                loinc_code=analyte.loinc_code,
                value_type=analyte.value_type,
                coded_values=tuple(analyte.coded_values),
            )
            for analyte in analytes
            if analyte.test_id == item.test_id
        ),
    )


def oru_results_apply(
    *,
    target: OruTarget,
    results: Sequence[lab_results.ResultInput],
    performed_at: datetime,
    performer: str,
    status: str,
    reason: str,
    recorded_by: str,
) -> None:
    """Record an ORU's results on the order of `target` (found by oru_target, whose read holds the branch
    restriction) through the results service, exactly as the REST API records them (docs/hl7-inbound.md).
    FieldError and InvalidState as lab_results_record raises them; OruOrderUnknown when the order is gone."""
    try:
        lab_results.lab_results_record_by_id(
            order_id=target.order_id,
            results=results,
            performed_at=performed_at,
            performer=performer,
            status=status,
            reason=reason,
            recorded_by=recorded_by,
        )
    except LabOrder.DoesNotExist:
        raise OruOrderUnknown(str(target.order_id)) from None
