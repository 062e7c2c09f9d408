"""Modality Performed Procedure Step with pynetdicom as the modality: N-CREATE IN PROGRESS starts the item,
N-SET COMPLETED or DISCONTINUED finishes it, through lab.procedures (the order's lock, the lab events); bad
steps get the DIMSE failure status and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone
from pydicom.dataset import Dataset
from pydicom.uid import generate_uid
from pynetdicom import AE
from pynetdicom.association import Association
from pynetdicom.sop_class import ModalityPerformedProcedureStep, Verification  # type: ignore[attr-defined]

from integrations.models import WebhookEvent
from lab import results
from lab.models import ItemStatus, LabOrderItem, OrderStatus
from tests.integrations.dicom.conftest import IST, SERVER_AE, DicomWorld

MPPS = ModalityPerformedProcedureStep


@pytest.fixture
def modality(server: int) -> Iterator[Any]:
    """connect(calling_ae): an established association with the server (released after the test)."""
    opened: list[Association] = []

    def connect(calling: str = "BLR_CT1") -> Association:
        ae = AE(ae_title=calling)
        ae.add_requested_context(MPPS)
        ae.add_requested_context(Verification)
        assoc = ae.associate("127.0.0.1", server, ae_title=SERVER_AE)
        assert assoc.is_established
        opened.append(assoc)
        return assoc

    yield connect
    for assoc in opened:
        if assoc.is_established:
            assoc.release()


def in_progress(accession: str) -> Dataset:
    step = Dataset()
    step.AccessionNumber = accession
    step.StudyInstanceUID = generate_uid()
    attributes = Dataset()
    attributes.ScheduledStepAttributesSequence = [step]
    attributes.PatientID = "BLR-000101"
    attributes.PerformedProcedureStepStatus = "IN PROGRESS"
    attributes.PerformedProcedureStepStartDate = "20261201"
    attributes.PerformedProcedureStepStartTime = "093500"
    attributes.Modality = "CT"
    return attributes


def finished(status: str) -> Dataset:
    changes = Dataset()
    changes.PerformedProcedureStepStatus = status
    changes.PerformedProcedureStepEndDate = "20261201"
    changes.PerformedProcedureStepEndTime = "094500"
    return changes


def create(assoc: Association, accession: str, uid: str | None = None) -> tuple[int, str]:
    uid = uid or generate_uid()
    status, _ = assoc.send_n_create(in_progress(accession), MPPS, uid)
    return int(status.Status), uid


def set_status(assoc: Association, uid: str, status_text: str) -> Dataset:
    status, _ = assoc.send_n_set(finished(status_text), MPPS, uid)
    return status


def event_types(since: int = 0) -> list[str]:
    return list(WebhookEvent.objects.order_by("created_at", "id").values_list("type", flat=True))[since:]


def item_states(order_item: LabOrderItem) -> tuple[str, str, str]:
    item = LabOrderItem.objects.select_related("order").get(pk=order_item.pk)
    return item.status, item.order.status, item.mpps_instance_uid


@pytest.fixture
def ct(world: DicomWorld) -> LabOrderItem:
    return world.order([world.ct], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST)).items.get()


def test_n_create_in_progress_starts_the_item_and_publishes_the_event(
    world: DicomWorld, ct: LabOrderItem, modality: Any
) -> None:
    before = len(event_types())
    status, uid = create(modality(), ct.accession_number)

    assert status == 0x0000
    assert item_states(ct) == (ItemStatus.IN_PROGRESS, OrderStatus.ORDERED, uid)
    assert event_types(before) == ["imaging_procedure.started"]
    payload = WebhookEvent.objects.get(type="imaging_procedure.started").payload
    assert payload["order"]["items"][0]["accession_number"] == ct.accession_number
    assert payload["order"]["items"][0]["status"] == "in_progress"


def test_n_set_completed_completes_the_item_and_the_report_then_finalizes_the_order(
    world: DicomWorld, ct: LabOrderItem, modality: Any
) -> None:
    assoc = modality()
    _, uid = create(assoc, ct.accession_number)
    before = len(event_types())

    status = set_status(assoc, uid, "COMPLETED")

    assert status.Status == 0x0000
    assert item_states(ct) == (ItemStatus.COMPLETED, OrderStatus.ORDERED, uid)
    assert event_types(before) == ["imaging_procedure.completed"]

    # The report: a preliminary one keeps the item completed and the order open; the final one closes it.
    report = [results.ResultInput(test="CT-HEAD", analyte=None, value="No acute findings.", unit=None, note="")]
    order = ct.order
    results.lab_results_record(
        order=order, results=report, performed_at=timezone.now(), performer="Dr. Rao", status="preliminary"
    )
    assert item_states(ct)[:2] == (ItemStatus.COMPLETED, OrderStatus.RESULTED)
    results.lab_results_record(
        order=order, results=report, performed_at=timezone.now(), performer="Dr. Rao", status="final"
    )
    assert item_states(ct)[:2] == (ItemStatus.COMPLETED, OrderStatus.FINAL)
    assert event_types(before)[-1] == "lab_result.finalized"


def test_n_set_discontinued_cancels_the_item_and_its_order(world: DicomWorld, ct: LabOrderItem, modality: Any) -> None:
    assoc = modality()
    _, uid = create(assoc, ct.accession_number)
    before = len(event_types())

    assert set_status(assoc, uid, "DISCONTINUED").Status == 0x0000

    assert item_states(ct) == (ItemStatus.CANCELLED, OrderStatus.CANCELLED, uid)
    assert event_types(before) == ["imaging_procedure.discontinued", "lab_order.cancelled"]


def test_a_discontinued_item_leaves_the_rest_of_its_order_open(world: DicomWorld, modality: Any) -> None:
    order = world.order([world.ct, world.xray], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST))
    ct, xray = order.items.order_by("position")
    assoc = modality()
    _, uid = create(assoc, ct.accession_number)
    assert set_status(assoc, uid, "DISCONTINUED").Status == 0x0000
    assert item_states(ct)[:2] == (ItemStatus.CANCELLED, OrderStatus.ORDERED)
    assert item_states(xray)[0] == ItemStatus.SCHEDULED


def test_an_unknown_accession_number_is_a_processing_failure_and_changes_nothing(
    world: DicomWorld, ct: LabOrderItem, modality: Any
) -> None:
    before = len(event_types())
    status, _ = create(modality(), "BLR-26-9999999")
    assert status == 0x0110
    assert item_states(ct) == (ItemStatus.SCHEDULED, OrderStatus.ORDERED, "")
    assert event_types(before) == []


def test_another_branchs_accession_number_is_unknown(world: DicomWorld, modality: Any) -> None:
    us = world.order(
        [world.us], patient=world.mehta, branch=world.mum, at=datetime(2026, 12, 1, 10, 0, tzinfo=IST)
    ).items.get()
    status, _ = create(modality("BLR_CT1"), us.accession_number)
    assert status == 0x0110
    assert item_states(us)[0] == ItemStatus.SCHEDULED
    status, _ = create(modality("MUM_US1"), us.accession_number)
    assert status == 0x0000


def test_bad_steps_get_their_failure_status(world: DicomWorld, ct: LabOrderItem, modality: Any) -> None:
    assoc = modality()
    # Not IN PROGRESS at creation: invalid attribute value.
    attributes = in_progress(ct.accession_number)
    attributes.PerformedProcedureStepStatus = "COMPLETED"
    status, _ = assoc.send_n_create(attributes, MPPS, generate_uid())
    assert status.Status == 0x0106
    # No accession number: missing attribute.
    attributes = in_progress("")
    status, _ = assoc.send_n_create(attributes, MPPS, generate_uid())
    assert status.Status == 0x0120
    # An N-SET of a step nobody created: no such instance.
    assert set_status(assoc, generate_uid(), "COMPLETED").Status == 0x0112
    assert item_states(ct) == (ItemStatus.SCHEDULED, OrderStatus.ORDERED, "")

    _, uid = create(assoc, ct.accession_number)
    # The same instance created twice: duplicate; the same item started again: processing failure.
    assert create(assoc, ct.accession_number, uid)[0] == 0x0111
    assert create(assoc, ct.accession_number)[0] == 0x0110
    # A status that does not exist: invalid attribute value.
    assert set_status(assoc, uid, "PAUSED").Status == 0x0106
    assert set_status(assoc, uid, "COMPLETED").Status == 0x0000
    # A finished step may no longer be updated (PS3.4 F.7.2.2: 0110 with error id A710).
    refused = set_status(assoc, uid, "DISCONTINUED")
    assert (refused.Status, refused.ErrorID) == (0x0110, 0xA710)
    assert item_states(ct) == (ItemStatus.COMPLETED, OrderStatus.ORDERED, uid)
    assert assoc.send_c_echo().Status == 0x0000  # the association, and the server, carry on
