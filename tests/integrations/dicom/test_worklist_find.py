"""C-FIND on the Modality Worklist with DCMTK's findscu (and C-ECHO with echoscu) against the real server."""

from __future__ import annotations

import subprocess
from datetime import datetime
from typing import Any

import pytest

from integrations.dicom.models import DicomCallingAE
from lab import services
from lab.models import ItemStatus, LabOrderItem, study_instance_uid
from tests.integrations.dicom.conftest import IST, SERVER_AE, DicomWorld, findscu

pytestmark = pytest.mark.usefixtures("dcmtk")

SPS = "ScheduledProcedureStepSequence[0]"
ALL_KEYS = [
    "PatientName",
    "PatientID",
    "PatientBirthDate",
    "PatientSex",
    "AccessionNumber",
    "RequestedProcedureDescription",
    "RequestedProcedureCodeSequence",
    "StudyInstanceUID",
    f"{SPS}.ScheduledStationAETitle",
    f"{SPS}.Modality",
    f"{SPS}.ScheduledProcedureStepStartDate",
    f"{SPS}.ScheduledProcedureStepStartTime",
    f"{SPS}.ScheduledProcedureStepID",
    f"{SPS}.ScheduledProcedureStepDescription",
    f"{SPS}.ScheduledProcedureStepStatus",
]


def accessions(result: object) -> list[str]:
    return [str(answer.AccessionNumber) for answer in result.answers]  # type: ignore[attr-defined]


def test_a_ct_item_is_answered_with_every_worklist_attribute(world: DicomWorld, server: int) -> None:
    order = world.order([world.ct], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST))
    item = order.items.get()

    result = findscu(server, ALL_KEYS)

    assert result.returncode == 0, result.log
    assert len(result.answers) == 1
    answer = result.answers[0]
    assert str(answer.PatientName) == "Sharma^Priya"
    assert answer.PatientID == "BLR-000101"
    assert answer.PatientBirthDate == "19850314"
    assert answer.PatientSex == "F"
    assert answer.AccessionNumber == item.accession_number
    assert answer.RequestedProcedureDescription == "CT head without contrast"
    code = answer.RequestedProcedureCodeSequence[0]
    assert (code.CodeValue, code.CodingSchemeDesignator, code.CodeMeaning) == (
        "30799-1",
        "LN",
        "CT head without contrast",
    )
    assert answer.StudyInstanceUID == study_instance_uid(item.id) == f"2.25.{item.id.int}"
    step = answer.ScheduledProcedureStepSequence[0]
    assert {element.keyword for element in step} == {key.rpartition(".")[2] for key in ALL_KEYS if key.startswith(SPS)}
    assert step.ScheduledStationAETitle == "BLR_CT1"
    assert step.Modality == "CT"
    assert step.ScheduledProcedureStepStartDate == "20261201"
    assert step.ScheduledProcedureStepStartTime == "093000"
    assert step.ScheduledProcedureStepID == item.accession_number
    assert step.ScheduledProcedureStepDescription == "CT head without contrast"
    assert step.ScheduledProcedureStepStatus == "SCHEDULED"


def test_the_study_instance_uid_is_the_same_on_every_query(world: DicomWorld, server: int) -> None:
    world.order([world.ct], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST))
    first = findscu(server, ["StudyInstanceUID"]).answers[0].StudyInstanceUID
    second = findscu(server, ["StudyInstanceUID"]).answers[0].StudyInstanceUID
    assert first == second
    assert len(first) <= 64


def test_c_echo_with_echoscu_succeeds(world: DicomWorld, server: int) -> None:
    done = subprocess.run(  # noqa: S603 - a fixed command line
        ["echoscu", "-aet", "BLR_CT1", "-aec", SERVER_AE, "-to", "10", "127.0.0.1", str(server)],  # noqa: S607
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def schedule(world: DicomWorld) -> dict[str, LabOrderItem]:
    """BLR: a CT for Sharma on 1 Dec 09:30, an X-ray for Iyer on 2 Dec 14:00 and a CT for Iyer on 4 Dec
    08:00 (IST); MUM: an ultrasound for Mehta on 1 Dec 10:00."""
    return {
        "ct_sharma": world.order([world.ct], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST)).items.get(),
        "xr_iyer": world.order(
            [world.xray], patient=world.iyer, at=datetime(2026, 12, 2, 14, 0, tzinfo=IST)
        ).items.get(),
        "ct_iyer": world.order([world.ct], patient=world.iyer, at=datetime(2026, 12, 4, 8, 0, tzinfo=IST)).items.get(),
        "us_mehta": world.order(
            [world.us], patient=world.mehta, branch=world.mum, at=datetime(2026, 12, 1, 10, 0, tzinfo=IST)
        ).items.get(),
    }


def names(schedule: dict[str, LabOrderItem], *keys: str) -> list[str]:
    return [schedule[key].accession_number for key in keys]


# (id, the matching keys, the items answered in order). One test walks them all: each test of this module
# truncates every table afterwards, which costs seconds on the shared machine.
MATCHING_CASES: list[tuple[str, list[str], list[str]]] = [
    ("universal", [], ["ct_sharma", "xr_iyer", "ct_iyer"]),
    ("modality", [f"{SPS}.Modality=CT"], ["ct_sharma", "ct_iyer"]),
    ("modality-none", [f"{SPS}.Modality=MR"], []),
    ("station", [f"{SPS}.ScheduledStationAETitle=BLR_XR1"], ["xr_iyer"]),
    ("station-wild", [f"{SPS}.ScheduledStationAETitle=BLR_*"], ["ct_sharma", "xr_iyer", "ct_iyer"]),
    ("date", [f"{SPS}.ScheduledProcedureStepStartDate=20261202"], ["xr_iyer"]),
    ("range", [f"{SPS}.ScheduledProcedureStepStartDate=20261201-20261202"], ["ct_sharma", "xr_iyer"]),
    ("range-open-start", [f"{SPS}.ScheduledProcedureStepStartDate=-20261201"], ["ct_sharma"]),
    ("range-open-end", [f"{SPS}.ScheduledProcedureStepStartDate=20261202-"], ["xr_iyer", "ct_iyer"]),
    ("date-none", [f"{SPS}.ScheduledProcedureStepStartDate=20261203"], []),
    ("patient", ["PatientID=BLR-000102"], ["xr_iyer", "ct_iyer"]),
    ("patient-wild", ["PatientID=BLR-00010?"], ["ct_sharma", "xr_iyer", "ct_iyer"]),
    ("patient-prefix", ["PatientID=BLR-*"], ["ct_sharma", "xr_iyer", "ct_iyer"]),
    ("patient-of-another-branch", ["PatientID=MUM-000201"], []),
    (
        "combined",
        [f"{SPS}.Modality=CT", f"{SPS}.ScheduledProcedureStepStartDate=20261204", "PatientID=BLR-000102"],
        ["ct_iyer"],
    ),
    ("name-family", ["PatientName=Iyer"], ["xr_iyer", "ct_iyer"]),
    ("name-any-case", ["PatientName=IYER^ravi"], ["xr_iyer", "ct_iyer"]),
    ("name-prefix", ["PatientName=Sh*"], ["ct_sharma"]),
    ("name-given-wild", ["PatientName=*^P?iya"], ["ct_sharma"]),
    ("name-other-given", ["PatientName=Iyer^Priya"], []),
    ("name-of-another-branch", ["PatientName=Mehta"], []),
    # a date and a time are one date-time range (PS3.4 C.2.2.2.5.1)
    (
        "date-and-time",
        [
            f"{SPS}.ScheduledProcedureStepStartDate=20261201-20261202",
            f"{SPS}.ScheduledProcedureStepStartTime=1000-1400",
        ],
        ["xr_iyer"],  # 1 Dec 10:00 to 2 Dec 14:00:59: not Sharma's 09:30 on the 1st
    ),
    (
        "date-and-time-same-day",
        [f"{SPS}.ScheduledProcedureStepStartDate=20261201", f"{SPS}.ScheduledProcedureStepStartTime=0900-0930"],
        ["ct_sharma"],  # the end's minute is included
    ),
    ("time-of-day", [f"{SPS}.ScheduledProcedureStepStartTime=-0930"], ["ct_sharma", "ct_iyer"]),
    ("time-from", [f"{SPS}.ScheduledProcedureStepStartTime=1200-"], ["xr_iyer"]),
    ("time-exact-minute", [f"{SPS}.ScheduledProcedureStepStartTime=0800"], ["ct_iyer"]),
]


def test_each_matching_key_selects_the_items(schedule: dict[str, LabOrderItem], server: int) -> None:
    for case, keys, expected in MATCHING_CASES:
        result = findscu(server, ["AccessionNumber", *keys])
        assert result.returncode == 0, (case, result.log)
        assert accessions(result) == names(schedule, *expected), case


def test_the_accession_number_selects_its_item_alone(schedule: dict[str, LabOrderItem], server: int) -> None:
    accession = schedule["xr_iyer"].accession_number
    result = findscu(server, [f"AccessionNumber={accession}", "PatientName"])
    assert accessions(result) == [accession]
    assert str(result.answers[0].PatientName) == "Iyer^Ravi"


def test_another_branchs_modality_sees_only_its_branchs_items(schedule: dict[str, LabOrderItem], server: int) -> None:
    mum = findscu(server, ["AccessionNumber", "PatientID"], calling="MUM_US1")
    assert accessions(mum) == names(schedule, "us_mehta")
    blr_asking_for_mum = findscu(server, [f"AccessionNumber={schedule['us_mehta'].accession_number}"])
    assert blr_asking_for_mum.returncode == 0
    assert blr_asking_for_mum.answers == []


def test_only_open_imaging_items_are_scheduled(
    world: DicomWorld, schedule: dict[str, LabOrderItem], server: int
) -> None:
    LabOrderItem.objects.filter(pk=schedule["ct_sharma"].pk).update(status=ItemStatus.COMPLETED)
    LabOrderItem.objects.filter(pk=schedule["xr_iyer"].pk).update(status=ItemStatus.IN_PROGRESS)
    cancelled = world.order([world.ct], at=datetime(2026, 12, 1, 11, 0, tzinfo=IST))
    services.lab_order_cancel(order=cancelled, reason="Patient left")
    status = f"{SPS}.ScheduledProcedureStepStatus"

    assert accessions(findscu(server, ["AccessionNumber"])) == names(schedule, "xr_iyer", "ct_iyer")
    assert accessions(findscu(server, ["AccessionNumber", f"{status}=STARTED"])) == names(schedule, "xr_iyer")
    assert accessions(findscu(server, ["AccessionNumber", f"{status}=SCHEDULED"])) == names(schedule, "ct_iyer")
    assert findscu(server, ["AccessionNumber", f"{status}=COMPLETED"]).answers == []


def test_an_answer_is_bounded_to_the_earliest_items(
    schedule: dict[str, LabOrderItem], server: int, settings: Any
) -> None:
    settings.DICOM_WORKLIST_MAX_RESULTS = 2
    assert accessions(findscu(server, ["AccessionNumber"])) == names(schedule, "ct_sharma", "xr_iyer")


def test_an_unknown_calling_ae_is_rejected_at_association(schedule: dict[str, LabOrderItem], server: int) -> None:
    result = findscu(server, ["AccessionNumber"], calling="INTRUDER")
    assert result.returncode != 0
    assert "Association Rejected" in result.log
    assert "Calling AE Title Not Recognized" in result.log
    assert result.answers == []


def test_an_inactive_or_misplaced_calling_ae_is_rejected(schedule: dict[str, LabOrderItem], server: int) -> None:
    DicomCallingAE.objects.filter(ae_title="BLR_CT1").update(active=False)
    DicomCallingAE.objects.filter(ae_title="BLR_XR1").update(networks=["10.1.2.3", "127.0.0.2/32"])
    for calling in ("BLR_CT1", "BLR_XR1"):
        result = findscu(server, ["AccessionNumber"], calling=calling)
        assert "Association Rejected" in result.log, calling
    DicomCallingAE.objects.filter(ae_title="BLR_XR1").update(networks=["10.1.2.3", "127.0.0.0/8"])
    assert len(findscu(server, ["AccessionNumber"], calling="BLR_XR1").answers) == 3


@pytest.mark.parametrize(
    "key",
    [
        f"{SPS}.ScheduledProcedureStepStartDate=2026-12-01",
        f"{SPS}.ScheduledProcedureStepStartDate=20261301",
        f"{SPS}.ScheduledProcedureStepStartDate=20261205-20261201",
        f"{SPS}.ScheduledProcedureStepStartDate=-",
        f"{SPS}.ScheduledProcedureStepStartTime=25",
        f"{SPS}.ScheduledProcedureStepStartTime=09:30",
        f"{SPS}.ScheduledProcedureStepStartTime=1400-0900",
        "PatientName=" + "X" * 70,
    ],
)
def test_a_malformed_date_is_answered_a900_and_the_server_keeps_serving(
    schedule: dict[str, LabOrderItem], server: int, key: str
) -> None:
    result = findscu(server, ["AccessionNumber", key])
    assert "Received Final Find Response (Error: DataSetDoesNotMatchSOPClass)" in result.log, result.log
    assert result.answers == []
    assert len(findscu(server, ["AccessionNumber"]).answers) == 3


def test_an_unsupported_sop_class_is_refused_and_the_server_keeps_serving(
    schedule: dict[str, LabOrderItem], server: int
) -> None:
    # Patient Root Query/Retrieve - FIND: the presentation context is rejected, so findscu cannot ask.
    patient_root = subprocess.run(  # noqa: S603 - a fixed command line
        [  # noqa: S607 - DCMTK on the PATH
            "findscu",
            "-P",
            "-aet",
            "BLR_CT1",
            "-aec",
            SERVER_AE,
            "-to",
            "10",
            "-k",
            "QueryRetrieveLevel=PATIENT",
            "-k",
            "PatientID",
            "127.0.0.1",
            str(server),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert patient_root.returncode != 0
    assert "No Acceptable Presentation Contexts" in patient_root.stdout + patient_root.stderr
    assert len(findscu(server, ["AccessionNumber"]).answers) == 3
