"""What a worklist answer holds (PS3.4 K.6, Table K.6-1), tried with material nobody here wrote: every
`wlistqry*.dump` query DCMTK ships, converted with dump2dcm at test time and sent by DCMTK's findscu and by
pynetdicom as a second SCU. Each answer must hold every requested key (Type 2 empty when unknown), a
sequence's items only the attributes asked for (all of them when asked with an empty item), and no key that
was not asked for. Also the patient's medical alerts and allergies, and Patient's Name component groups."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pydicom
import pytest
from django.utils import timezone
from pydicom.dataset import Dataset
from pynetdicom import AE

from integrations.dicom import worklist
from lab.models import ImagingStation, LabOrderItem
from lab.ports import imaging_worklist
from patients.models import Allergy, Diagnosis
from tests.integrations.dicom.conftest import IST, SERVER_AE, DicomWorld, findscu

pytestmark = pytest.mark.usefixtures("dcmtk")

WLISTQRY = Path("/usr/share/doc/dcmtk/examples/wlistqry")
SPS = "ScheduledProcedureStepSequence"
STEP_KEYS = set(worklist._ITEM_KEYS[SPS])
CODE_KEYS = {"CodeValue", "CodingSchemeDesignator", "CodeMeaning"}

# Which items each DCMTK query selects in the world below (CT station AA2 "A2", X-ray station AA4 "A2").
EXPECTED_ITEMS = {
    "wlistqry0": ["ct", "xr"],
    "wlistqry1": ["ct", "xr"],
    "wlistqry2": ["ct"],  # AE title AA2, station name A2
    "wlistqry3": ["ct", "xr"],
    "wlistqry4": [],  # Modality DD
    "wlistqry5": ["xr"],  # from 12:00
    "wlistqry6": ["ct"],
    "wlistqry7": ["ct"],
    "wlistqry8": ["ct"],
    "wlistqry9": ["ct"],
    "wlistqry10": ["ct", "xr"],
    "wlistqry11": ["ct", "xr"],
    "wlistqry12": ["xr"],  # AE title AA4
}


def dump_files() -> list[Path]:
    return sorted(WLISTQRY.glob("wlistqry*.dump"), key=lambda path: int(path.stem.removeprefix("wlistqry")))


@pytest.fixture(scope="module")
def queries() -> Iterator[dict[str, Path]]:
    """Every shipped query as a DICOM file (dump2dcm), in a temporary folder."""
    if not shutil.which("dump2dcm") or not dump_files():
        pytest.skip("DCMTK's dump2dcm or its wlistqry examples are missing (apt-get install dcmtk)")
    with tempfile.TemporaryDirectory() as folder:
        converted = {}
        for dump in dump_files():
            target = Path(folder) / f"{dump.stem}.dcm"
            subprocess.run(["dump2dcm", str(dump), str(target)], check=True, capture_output=True)  # noqa: S603,S607
            converted[dump.stem] = target
        yield converted


def test_every_shipped_query_is_covered() -> None:
    assert [path.stem for path in dump_files()] == list(EXPECTED_ITEMS)


@pytest.fixture
def items(world: DicomWorld) -> dict[str, LabOrderItem]:
    """Sharma's CT (with alerts and allergies, some no longer active or entered in error) on 1 Dec 09:30 and
    Iyer's X-ray (none) on 2 Dec 14:00, IST; stations named as the DCMTK examples ask."""
    ImagingStation.objects.filter(modality="CT").update(ae_title="AA2", name="A2", location="RAD-ROOM-2")
    ImagingStation.objects.filter(modality="XR").update(ae_title="AA4", name="A2", location="")
    sharma = world.sharma
    Diagnosis.objects.create(patient=sharma, code="E11.9", description="Type 2 diabetes mellitus")
    Diagnosis.objects.create(patient=sharma, code="N18.3", description="Chronic kidney disease, stage 3")
    Diagnosis.objects.create(patient=sharma, code="J45", description="Asthma", status=Diagnosis.Status.RESOLVED)
    marked = {
        "entered_in_error": True,
        "entered_in_error_at": timezone.now(),
        "entered_in_error_by": "staff:test",
        "entered_in_error_reason": "wrong patient",
    }
    Diagnosis.objects.create(patient=sharma, code="I10", description="Hypertension", **marked)
    Allergy.objects.create(
        patient=sharma, substance="Iodinated contrast media", severity="severe", reaction="Anaphylaxis"
    )
    Allergy.objects.create(patient=sharma, substance="Penicillin", severity="moderate")
    Allergy.objects.create(patient=sharma, substance="Latex", severity="mild", **marked)
    return {
        "ct": world.order([world.ct], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST)).items.get(),
        "xr": world.order([world.xray], patient=world.iyer, at=datetime(2026, 12, 2, 14, 0, tzinfo=IST)).items.get(),
    }


def expected_values(items: dict[str, LabOrderItem]) -> dict[str, dict[str, Any]]:
    """What each item's answer says for each key (top level, and `step.` / `protocol.` inside the step)."""
    ct, xr = items["ct"], items["xr"]
    common = {
        "RequestingPhysician": "Rao^Anil",
        "ScheduledPerformingPhysicianName": "",
        "PreMedication": "",
        "RequestedContrastAgent": "",
        "CommentsOnTheScheduledProcedureStep": "",
        "RequestedProcedurePriority": "ROUTINE",
    }
    return {
        ct.accession_number: {
            **common,
            "AccessionNumber": ct.accession_number,
            "PatientName": "Sharma^Priya",
            "PatientID": "BLR-000101",
            "PatientBirthDate": "19850314",
            "PatientSex": "F",
            "MedicalAlerts": ["Chronic kidney disease, stage 3 (N18.3)", "Type 2 diabetes mellitus (E11.9)"],
            "Allergies": ["Iodinated contrast media (severe: Anaphylaxis)", "Penicillin (moderate)"],
            "StudyInstanceUID": f"2.25.{ct.id.int}",
            "RequestedProcedureDescription": "CT head without contrast",
            "RequestedProcedureID": ct.accession_number,
            "Modality": "CT",
            "ScheduledStationAETitle": "AA2",
            "ScheduledProcedureStepStartDate": "20261201",
            "ScheduledProcedureStepStartTime": "093000",
            "ScheduledProcedureStepDescription": "CT head without contrast",
            "ScheduledProcedureStepID": ct.accession_number,
            "ScheduledStationName": "A2",
            "ScheduledProcedureStepLocation": "RAD-ROOM-2",
            "ScheduledProcedureStepStatus": "SCHEDULED",
            "code": ("30799-1", "LN", "CT head without contrast"),
        },
        xr.accession_number: {
            **common,
            "AccessionNumber": xr.accession_number,
            "PatientName": "Iyer^Ravi",
            "PatientID": "BLR-000102",
            "MedicalAlerts": "",
            "Allergies": "",
            "Modality": "XR",
            "ScheduledStationAETitle": "AA4",
            "ScheduledProcedureStepStartTime": "140000",
            "ScheduledStationName": "A2",
            "ScheduledProcedureStepLocation": "",
            "code": ("36643-5", "LN", "Chest X-ray PA view"),
        },
    }


def value(element: Any) -> Any:
    if element.VR == "SQ":
        return element.value
    raw = element.value
    if raw is None:
        return ""
    if isinstance(raw, pydicom.multival.MultiValue):
        return [str(part) for part in raw]
    return str(raw)


def check_item(answer: Dataset, query: Dataset, expected: dict[str, Any], where: str) -> None:
    """The answer holds exactly the keys the query asks for, with the expected values."""
    asked = {element.keyword for element in query}
    got = {element.keyword for element in answer} - {"SpecificCharacterSet"}
    assert got == asked, where
    for element in answer:
        keyword = element.keyword
        if element.VR != "SQ":
            if keyword in expected:
                assert value(element) == expected[keyword], f"{where}.{keyword}"
            continue
        query_items = query[keyword].value
        if keyword == SPS:
            universal = not query_items or len(query_items[0]) == 0
            assert len(element.value) == 1, where
            step = element.value[0]
            if universal:
                assert {e.keyword for e in step} == STEP_KEYS, where
                check_item(step, step, expected, f"{where}.{keyword}")
            else:
                check_item(step, query_items[0], expected, f"{where}.{keyword}")
        elif keyword in ("RequestedProcedureCodeSequence", "ScheduledProtocolCodeSequence"):
            (code,) = element.value
            wanted = {e.keyword for e in query_items[0]} if query_items and len(query_items[0]) else CODE_KEYS
            assert {e.keyword for e in code} == wanted, f"{where}.{keyword}"
            values = dict(zip(("CodeValue", "CodingSchemeDesignator", "CodeMeaning"), expected["code"], strict=True))
            for part in code:
                assert str(part.value) == values[part.keyword], f"{where}.{keyword}.{part.keyword}"


def findscu_file(port: int, query: Path) -> list[Dataset]:
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(  # noqa: S603 - our own command line
            [  # noqa: S607 - DCMTK on the PATH
                "findscu",
                "-W",
                "-aet",
                "BLR_CT1",
                "-aec",
                SERVER_AE,
                "-to",
                "10",
                "-X",
                "-od",
                folder,
                "127.0.0.1",
                str(port),
                str(query),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return [pydicom.dcmread(path) for path in sorted(Path(folder).glob("rsp*.dcm"))]


def pynetdicom_find(port: int, query: Path) -> list[Dataset]:
    ae = AE(ae_title="BLR_CT1")
    ae.add_requested_context(worklist_find := "1.2.840.10008.5.1.4.31")
    assoc = ae.associate("127.0.0.1", port, ae_title=SERVER_AE)
    assert assoc.is_established
    try:
        identifier = pydicom.dcmread(query)
        del identifier.file_meta
        return [
            answer
            for status, answer in assoc.send_c_find(identifier, worklist_find)
            if status and status.Status == 0xFF00
        ]
    finally:
        assoc.release()


@pytest.mark.parametrize("client", ["findscu", "pynetdicom"])
def test_every_dcmtk_example_query_gets_exactly_the_keys_it_asks_for(
    items: dict[str, LabOrderItem], server: int, queries: dict[str, Path], client: str
) -> None:
    expected = expected_values(items)
    accession = {key: item.accession_number for key, item in items.items()}
    for name, path in queries.items():
        answers = findscu_file(server, path) if client == "findscu" else pynetdicom_find(server, path)
        assert [str(a.AccessionNumber) for a in answers if "AccessionNumber" in a] == (
            [accession[key] for key in EXPECTED_ITEMS[name]] if "AccessionNumber" in pydicom.dcmread(path) else []
        ), name
        assert len(answers) == len(EXPECTED_ITEMS[name]), name
        query = pydicom.dcmread(path)
        for answer, key in zip(answers, EXPECTED_ITEMS[name], strict=True):
            assert answer.SpecificCharacterSet == "ISO_IR 192"
            check_item(answer, query, expected[accession[key]], name)


def test_type_2_keys_are_answered_empty_and_unasked_step_attributes_never(
    items: dict[str, LabOrderItem], server: int
) -> None:
    result = findscu(
        server,
        [
            "PatientWeight",
            "PregnancyStatus",
            "ConfidentialityConstraintOnPatientDataDescription",
            "AdmissionID",
            "ReferencedStudySequence",
            "PatientName=Sharma",
            f"{SPS}[0].Modality",
            f"{SPS}[0].ScheduledProtocolCodeSequence[0].CodeValue",
        ],
    )
    (answer,) = result.answers
    assert {e.keyword for e in answer} == {
        "SpecificCharacterSet",
        "PatientWeight",
        "PregnancyStatus",
        "ConfidentialityConstraintOnPatientDataDescription",
        "AdmissionID",
        "ReferencedStudySequence",
        "PatientName",
        SPS,
    }
    assert (answer.PatientWeight, answer.PregnancyStatus, answer.AdmissionID) == (None, None, "")
    assert list(answer.ReferencedStudySequence) == []
    step = answer[SPS][0]
    assert {e.keyword for e in step} == {"Modality", "ScheduledProtocolCodeSequence"}
    assert [{e.keyword: e.value for e in code} for code in step.ScheduledProtocolCodeSequence] == [
        {"CodeValue": "30799-1"}
    ]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("PatientName==Gill", []),  # only the ideographic group: we store none
        ("PatientName===Gill", []),  # only the phonetic group
        ("PatientName=Sharma=Gill", []),
        ("PatientName=Sharma^Priya=", ["ct"]),  # an empty group is no constraint
        ("PatientName=Sharma=*=*", ["ct"]),
        ("PatientName=*=", ["ct", "xr"]),
        ("PatientName=", ["ct", "xr"]),
    ],
)
def test_a_name_query_matches_only_the_component_groups_given(
    items: dict[str, LabOrderItem], server: int, key: str, expected: list[str]
) -> None:
    result = findscu(server, ["AccessionNumber", key])
    assert result.returncode == 0, result.log
    assert [str(a.AccessionNumber) for a in result.answers] == [items[k].accession_number for k in expected]


def test_the_alerts_of_every_answer_are_read_in_one_query(
    items: dict[str, LabOrderItem], django_assert_num_queries: Any
) -> None:
    entries = imaging_worklist(
        worklist.query_from_identifier(Dataset(), branch_id=items["ct"].order.branch_id, zone=IST), limit=10
    )
    query = Dataset()
    query.MedicalAlerts = None
    query.Allergies = None
    requested = worklist.requested_keys(query)
    with django_assert_num_queries(1):
        alerts = worklist.answers_alerts(entries, requested)
    assert [dict(worklist.answer_elements(entry, requested, alerts)) for entry in entries] == [
        {
            "SpecificCharacterSet": "ISO_IR 192",
            "MedicalAlerts": "Chronic kidney disease, stage 3 (N18.3)\\Type 2 diabetes mellitus (E11.9)",
            "Allergies": "Iodinated contrast media (severe: Anaphylaxis)\\Penicillin (moderate)",
        },
        {"SpecificCharacterSet": "ISO_IR 192", "MedicalAlerts": "", "Allergies": ""},
    ]
    with django_assert_num_queries(0):  # not asked: not read
        assert worklist.answers_alerts(entries, worklist.requested_keys(Dataset())) == {}


def test_multi_valued_alerts_are_cut_to_64_characters_each_without_backslashes() -> None:
    assert worklist._lo_values(("A\\B", "x" * 80, "  ", "Latex (mild)")) == "A B\\" + "x" * 64 + "\\Latex (mild)"
