"""The DICOM worklist tests' world and server: two branches (BLR with a CT and an X-ray station, MUM with an
ultrasound one), imaging orders through lab.services, the allowed calling AE titles, and the real server
(integrations.dicom.server) listening on a free port in this process, queried by DCMTK's findscu and
echoscu (independent clients) and by pynetdicom for MPPS.

Without DCMTK the findscu tests are skipped with the reason, unless REQUIRE_DCMTK=1 (.ci/run sets it), where
that is a failure."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pydicom
import pytest

from integrations.dicom.models import DicomCallingAE
from integrations.dicom.server import worklist_serve
from lab import services
from lab.models import ImagingStation, LabOrder, LabOrderItem, LabTest, Priority
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.lab.order_factories import imaging_test
from tests.patients.factories import PatientFactory

IST = ZoneInfo("Asia/Kolkata")
SERVER_AE = "CLINIC_MWL"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class DicomWorld:
    blr: Any
    mum: Any
    ct: LabTest
    xray: LabTest
    us: LabTest
    sharma: Any  # BLR patient
    iyer: Any  # BLR patient
    mehta: Any  # MUM patient
    doctor: Any
    mum_doctor: Any

    def order(self, tests: list[LabTest], *, at: datetime, patient: Any = None, branch: Any = None) -> LabOrder:
        """An order placed through the service, its items then scheduled at `at`."""
        branch = branch or self.blr
        order = services.lab_order_create(
            branch=branch,
            patient=patient or self.sharma,
            doctor=self.doctor if branch == self.blr else self.mum_doctor,
            tests=tests,
            priority=Priority.ROUTINE,
            ordered_by="test",
        )
        LabOrderItem.objects.filter(order=order).update(scheduled_at=at)
        return order


def _patient(patient_id: str, first: str, last: str, born: str, gender: str, branch: Any) -> Any:
    return PatientFactory(
        patient_id=patient_id,
        first_name=first,
        last_name=last,
        date_of_birth=born,
        gender=gender,
        registration_branch=branch,
    )


@pytest.fixture
def world(transactional_db: None) -> DicomWorld:
    blr = BranchFactory(code="BLR", name="Bengaluru Central Clinic", state="Karnataka", time_zone="Asia/Kolkata")
    mum = BranchFactory(code="MUM", name="Mumbai Andheri Hospital", state="Maharashtra", time_zone="Asia/Kolkata")
    department = DepartmentFactory(name="Radiology")
    doctor = DoctorFactory(name="Dr. Anil Rao", department=department, branches=[blr])
    mum_doctor = DoctorFactory(name="Dr. Meera Shah", department=department, branches=[mum])
    ct = imaging_test(code="CT-HEAD", name="CT head without contrast", modality="CT", loinc_code="30799-1")
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray PA view", modality="XR", loinc_code="36643-5")
    us = imaging_test(code="US-ABD", name="Ultrasound abdomen", modality="US", loinc_code="24558-9")
    ImagingStation.objects.create(branch=blr, modality="CT", ae_title="BLR_CT1", name="Room 2 CT")
    ImagingStation.objects.create(branch=blr, modality="XR", ae_title="BLR_XR1", name="X-ray room")
    ImagingStation.objects.create(branch=mum, modality="US", ae_title="MUM_US1", name="Ultrasound")
    for title, branch in (("BLR_CT1", blr), ("BLR_XR1", blr), ("MUM_US1", mum)):
        DicomCallingAE.objects.create(ae_title=title, branch=branch, networks=["127.0.0.1"])
    return DicomWorld(
        blr=blr,
        mum=mum,
        ct=ct,
        xray=xray,
        us=us,
        sharma=_patient("BLR-000101", "Priya", "Sharma", "1985-03-14", "female", blr),
        iyer=_patient("BLR-000102", "Ravi", "Iyer", "1970-11-02", "male", blr),
        mehta=_patient("MUM-000201", "Asha", "Mehta", "1990-07-21", "female", mum),
        doctor=doctor,
        mum_doctor=mum_doctor,
    )


@pytest.fixture
def server(world: DicomWorld, settings: Any) -> Iterator[int]:
    """The worklist server on a free port of 127.0.0.1; yields the port."""
    settings.DICOM_TIMEOUT_SECONDS = 10
    port = free_port()
    running = worklist_serve(host="127.0.0.1", port=port, ae_title=SERVER_AE)
    yield port
    running.shutdown()


@pytest.fixture(scope="session")
def dcmtk() -> None:
    if shutil.which("findscu") and shutil.which("echoscu"):
        return
    if os.environ.get("REQUIRE_DCMTK") == "1":
        raise pytest.UsageError("REQUIRE_DCMTK=1 but DCMTK's findscu/echoscu are missing (apt-get install dcmtk).")
    pytest.skip("DCMTK (findscu, echoscu) is not installed: apt-get install dcmtk")


@dataclass
class FindResult:
    returncode: int
    answers: list[pydicom.Dataset]
    log: str


def findscu(port: int, keys: list[str], *, calling: str = "BLR_CT1") -> FindResult:
    """Run DCMTK's findscu -W with the keys (each `-k` argument); the answers it extracted, in order."""
    with tempfile.TemporaryDirectory() as folder:
        arguments = ["findscu", "-v", "-W", "-aet", calling, "-aec", SERVER_AE, "-to", "10", "-X", "-od", folder]
        for key in keys:
            arguments += ["-k", key]
        done = subprocess.run(  # noqa: S603 - our own command line
            [*arguments, "127.0.0.1", str(port)], capture_output=True, text=True, timeout=30
        )
        files = sorted(Path(folder).glob("rsp*.dcm"))
        answers = [pydicom.dcmread(path) for path in files]
    return FindResult(done.returncode, answers, done.stdout + done.stderr)
