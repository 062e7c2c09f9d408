"""Independent HL7 parts for the tests: an MLLP receiver built on the `hl7` package (its asyncio server,
answering each message with an ACK made by `hl7`), the clinic's listener in a thread on a free port, hl7apy
validation of what we emit, and a small lab world."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import hl7
from django.utils import timezone
from hl7.mllp import start_hl7_server
from hl7apy.consts import VALIDATION_LEVEL
from hl7apy.parser import parse_message, parse_segment
from hl7apy.v2_5_1.datatypes import DATATYPES_STRUCTS
from hl7apy.validation import Validator

from integrations.hl7.listener import Listener
from integrations.hl7.models import Hl7Sender
from integrations.hl7.workers import WorkerPool
from lab import services
from lab.models import Priority, RangeSex, ReferenceRange
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.lab.order_factories import AnalyteFactory, LabTestFactory, imaging_test
from tests.patients.factories import PatientFactory

D = Decimal


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hl7apy_validate(er7: str) -> None:
    """Strict hl7apy validation of the 2.5.1 structure. hl7apy reads ORM_O01's choice group (OBR | RQD | RQ1 |
    RXO | ODS | ODT) as a sequence and asks for all six; with an OBR present, those five are not errors."""
    message = parse_message(er7, validation_level=VALIDATION_LEVEL.STRICT, find_groups=True)
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as report:
        with contextlib.suppress(Exception):  # the report holds every error
            Validator.validate(message, reference=message.reference, report_file=report.name)
        lines = [line for line in Path(report.name).read_text().splitlines() if line.startswith("Error")]
    choice = "ORM_O01_OBRRQDRQ1RXOODSODT_SUPPGRP."
    real = [line for line in lines if not (choice in line and "\rOBR|" in er7.replace("\n", "\r"))]
    assert not real, real


class Receiver:
    """An MLLP receiver on the `hl7` package: `codes` decides the ACK code of each message (default AA);
    `received` keeps every message (ER7) in arrival order. stop() and start() again on the same port
    simulate a restart."""

    def __init__(self, port: int | None = None, codes: Callable[[str], str] | None = None, delay: float = 0) -> None:
        self.port = port or free_port()
        self.codes = codes or (lambda text: "AA")
        self.delay = delay
        self.received: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None

    def control_ids(self) -> list[str]:
        return [str(hl7.parse(text).segment("MSH")(10)) for text in self.received]

    async def _handle(self, reader: Any, writer: Any) -> None:
        try:
            while not writer.is_closing():
                message = await reader.readmessage()
                text = str(message)
                self.received.append(text)
                if self.delay:
                    await asyncio.sleep(self.delay)
                code = self.codes(text)
                if code == "none":
                    continue  # no answer at all: the sender's timeout
                writer.writemessage(message.create_ack(ack_code=code))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def start(self) -> Receiver:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def main() -> None:
                self._server = await start_hl7_server(self._handle, host="127.0.0.1", port=self.port)
                ready.set()
                async with self._server:
                    await self._server.serve_forever()

            try:
                loop.run_until_complete(main())
            except asyncio.CancelledError:
                pass
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(5)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            loop, server = self._loop, self._server

            def shutdown() -> None:
                server.close()
                for task in asyncio.all_tasks(loop):
                    task.cancel()

            loop.call_soon_threadsafe(shutdown)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = self._server = self._thread = None


class ListenerThread:
    """The clinic's listener (integrations.hl7.listener.Listener) on a free port in its own thread."""

    def __init__(self, processes: int = 1) -> None:
        self.port = free_port()
        self.processes = processes  # > 1: worker processes of one thread each (integrations.hl7.workers)
        self.pool: WorkerPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> ListenerThread:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop

            async def main() -> None:
                self._stopped = asyncio.Event()
                if self.processes > 1:
                    self.pool = WorkerPool(processes=self.processes, threads=1)
                listener = Listener(host="127.0.0.1", port=self.port, threads=2, pool=self.pool)
                await listener.start()
                ready.set()
                await self._stopped.wait()
                await listener.stop(grace=2)

            try:
                loop.run_until_complete(main())
            except BaseException as exc:  # surfaced by the tests
                self.error = exc
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(5)
        return self

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        if self._loop is not None and self._stopped is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)


def wait_for(predicate: Callable[[], bool], timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def lab_world() -> dict[str, Any]:
    """BLR with a CBC (HGB, PLT with ranges and critical limits) and a chest X-ray; a collected order. The
    HL7 senders registered so far report for BLR (a sender reaches only its branches' orders)."""
    blr = BranchFactory(code="BLR", state="Karnataka", time_zone="Asia/Kolkata")
    for sender in Hl7Sender.objects.all():
        sender.branches.add(blr)
    cbc = LabTestFactory(code="CBC", name="Complete blood count")
    hgb = AnalyteFactory(
        test=cbc, code="HGB", loinc_code="718-7", unit="g/dL", critical_low=D("7"), critical_high=D("20"), position=0
    )
    plt = AnalyteFactory(
        test=cbc,
        code="PLT",
        loinc_code="777-3",
        unit="10*3/uL",
        critical_low=D("20"),
        critical_high=D("1000"),
        position=1,
    )
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.ANY, age_min_days=0, low=D("12"), high=D("15.5"))
    ReferenceRange.objects.create(analyte=plt, sex=RangeSex.ANY, age_min_days=0, low=D("150"), high=D("450"))
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray")
    patient = PatientFactory(
        registration_branch=blr, gender="female", date_of_birth=timezone.localdate() - timedelta(days=30 * 365)
    )
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.add(blr)
    order = services.lab_order_create(
        branch=blr, patient=patient, doctor=doctor, tests=[cbc, xray], priority=Priority.ROUTINE, ordered_by="test"
    )
    services.lab_order_collect(order=order)
    items = {item.test.code: item for item in order.items.select_related("test")}
    return {"blr": blr, "patient": patient, "doctor": doctor, "order": order, "cbc": cbc, "xray": xray, "items": items}


def oru(
    control_id: str,
    accession: str,
    patient_id: str,
    observations: list[tuple[str, str, str, str]],
    *,
    status: str = "F",
    version: str = "2.5.1",
) -> str:
    """An ORU^R01 as a lab system writes it: one OBR for the accession number, one OBX per
    (type, code, value, unit)."""
    now = timezone.now().strftime("%Y%m%d%H%M%S+0000")
    lines = [
        f"MSH|^~\\&|LIS|CITYLAB|CLINIC|BLR|{now}||ORU^R01^ORU_R01|{control_id}|P|{version}",
        f"PID|1||{patient_id}^^^BLR^MR||Doe^Jane",
        f"ORC|RE|{accession}^CLINIC|{accession}^LIS",
        f"OBR|1|{accession}^CLINIC|{accession}^LIS|CBC^Complete blood count^L|||{now}",
    ]
    for number, (value_type, code, value, unit) in enumerate(observations, start=1):
        lines.append(f"OBX|{number}|{value_type}|{code}^{code}^L||{value}|{unit}|||||{status}|||{now}||^Menon^K")
    return "\r".join(lines) + "\r"


def hl7apy_segment_names(er7: str) -> list[str]:
    """The segments hl7apy's group finder kept, in order: it drops a segment it cannot place (a Z segment,
    or a standard one out of place) without an error, so a strict validation alone can pass a message whose
    segments it never saw."""
    message = parse_message(er7, validation_level=VALIDATION_LEVEL.STRICT, find_groups=True)
    names: list[str] = []

    def walk(element: Any) -> None:
        for child in element.children:
            if child.classname == "Segment":
                names.append(child.name)
            else:
                walk(child)

    walk(message)
    return names


def hl7apy_validate_with_z(er7: str) -> list[str]:
    """Strict hl7apy 2.5.1 validation of the standard part of a message that may carry Z segments, which
    are returned (ER7) for the caller to check on their own. hl7apy types every field of a Z segment as a
    single ST (a component raises under STRICT), and its group finder drops Z segments, so the standard
    segments are validated without them and must all be kept by hl7apy, in order."""
    lines = [line for line in er7.replace("\n", "\r").split("\r") if line]
    standard = [line for line in lines if not line.startswith("Z")]
    text = "\r".join(standard) + "\r"
    hl7apy_validate(text)
    assert hl7apy_segment_names(text) == [line[:3] for line in standard]
    return [line for line in lines if line.startswith("Z")]


# ZDS-1 as IHE Scheduled Workflow defines it: an RP (reference pointer) of one component each.
_ZDS_REFERENCE = (
    "sequence",
    (("ZDS_1", ("sequence", DATATYPES_STRUCTS["RP"], "RP", "STUDY_INSTANCE_UID", None, -1), (1, 1), "FIE"),),
)
_DICOM_UID = re.compile(r"(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))+")


def zds_validate(er7: str, *, application: str) -> str:
    """A ZDS segment checked against its IHE definition with hl7apy (ZDS-1 an HL7 RP: the Study Instance UID,
    the application that assigned it, `Application`, `DICOM`); returns the UID."""
    segment = parse_segment(er7, version="2.5.1", validation_level=VALIDATION_LEVEL.STRICT, reference=_ZDS_REFERENCE)
    assert [child.name for child in segment.children] == ["ZDS_1"], er7
    pointer = segment.zds_1
    uid = str(pointer.rp_1.to_er7())
    assert _DICOM_UID.fullmatch(uid), uid  # PS3.5 9.1: digits and dots, no leading zero
    assert len(uid) <= 64, uid
    assert pointer.rp_2.to_er7() == application
    assert (pointer.rp_3.to_er7(), pointer.rp_4.to_er7()) == ("Application", "DICOM")
    return uid
