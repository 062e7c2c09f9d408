"""The DICOM Modality Worklist C-FIND over 10,000 scheduled imaging items (issue 19: p95 <= 100 ms).

    REDIS_URL=redis://127.0.0.1:6379/12 .venv/bin/python bench/dicom_worklist.py [--items 10000] [--runs 100]

In its own database (`clinic_dicom_bench`, created and migrated on first use): one branch with a CT, MR, US
and X-ray station, 1,000 patients, `--items` scheduled imaging items spread over the next 30 days (8:00-18:00
IST, one per order) and as many completed ones over the past 30 days (never answered, but in the table).
The server runs as production runs it (`manage.py dicom_worklist`, its own process). Two clients: DCMTK's
findscu (C++, as a modality; one process and one association per query, so its time includes the process
start, the association and its release), and a pynetdicom SCU on one association (Python on both ends: each
answer is encoded, polled for and decoded by pynetdicom's reactors). Each query shape is timed from the
request to the last answer.

Then the attack of issue 32: `--idle` (50) plain TCP connections that never send an association request, from
as many loopback addresses (127.0.0.2 and up), each reopened as soon as the server closes it (an attacker
reconnecting), while the registered modality (127.0.0.1) opens a new association for each C-ECHO and for each
one-item C-FIND, with pynetdicom and with DCMTK's echoscu/findscu (processes: their start included). Target:
each served within 1 s. Writes bench/results/dicom_worklist.{md,json}.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from harness import RESULTS, ROOT, free_port, measure, percentile, prepare, write

IST = ZoneInfo("Asia/Kolkata")
MODALITIES = ("CT", "MR", "US", "XR")


def generate(items: int) -> None:
    from django.utils import timezone

    from clinic.models import Branch
    from integrations.dicom.models import DicomCallingAE
    from lab.models import ImagingStation, ItemStatus, LabOrder, LabOrderItem, LabTest, TestKind
    from patients.models import Patient
    from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
    from tests.patients.factories import PatientFactory

    if Branch.objects.filter(code="BLR").exists():
        return
    rng = random.Random(19)
    branch: Any = BranchFactory(code="BLR", name="Bengaluru", state="Karnataka", time_zone="Asia/Kolkata")
    doctor: Any = DoctorFactory(name="Dr. Bench", department=DepartmentFactory(name="Radiology"), branches=[branch])
    tests = []
    for modality, loinc in zip(MODALITIES, ("30799-1", "24590-2", "24558-9", "36643-5"), strict=True):
        tests.append(
            LabTest.objects.create(
                code=f"{modality}-BENCH",
                name=f"{modality} study",
                loinc_code=loinc,
                kind=TestKind.IMAGING,
                modality=modality,
            )
        )
        ImagingStation.objects.create(branch=branch, modality=modality, ae_title=f"BLR_{modality}1")
    DicomCallingAE.objects.create(ae_title="BLR_CT1", branch=branch, networks=["127.0.0.1"])
    patients = Patient.objects.bulk_create(
        [PatientFactory.build(registration_branch=branch, patient_id=f"BLR-{n:06d}") for n in range(1000)]
    )
    now = timezone.now()
    today = now.astimezone(IST).replace(hour=0, minute=0, second=0, microsecond=0)
    orders, rows = [], []
    for n in range(2 * items):
        scheduled = n < items
        day = today + timedelta(days=rng.randrange(30) if scheduled else -1 - rng.randrange(30))
        at = day + timedelta(minutes=8 * 60 + rng.randrange(600))
        order = LabOrder(
            branch=branch,
            patient=rng.choice(patients),
            doctor=doctor,
            order_number=f"BLR-LAB-2026-{n:06d}",
            created_at=min(at, now),
            ordered_by="bench",
        )
        orders.append(order)
        rows.append(
            LabOrderItem(
                order=order,
                test=rng.choice(tests),
                accession_number=f"BLR-26-{n:07d}",
                status=ItemStatus.SCHEDULED if scheduled else ItemStatus.COMPLETED,
                scheduled_at=at,
            )
        )
    LabOrder.objects.bulk_create(orders, batch_size=2000)
    LabOrderItem.objects.bulk_create(rows, batch_size=2000)


# What a modality typically asks for (and what it shows).
RETURN_KEYS = (
    "PatientName",
    "PatientID",
    "PatientBirthDate",
    "PatientSex",
    "AccessionNumber",
    "RequestedProcedureDescription",
    "StudyInstanceUID",
)
STEP_KEYS = (
    "ScheduledStationAETitle",
    "Modality",
    "ScheduledProcedureStepStartDate",
    "ScheduledProcedureStepStartTime",
    "ScheduledProcedureStepID",
)


def query(keys: dict[str, str], step: dict[str, str]) -> Any:
    from pydicom.dataset import Dataset

    identifier = Dataset()
    for keyword in RETURN_KEYS:
        setattr(identifier, keyword, keys.get(keyword, ""))
    item = Dataset()
    for keyword in STEP_KEYS:
        setattr(item, keyword, step.get(keyword, ""))
    identifier.ScheduledProcedureStepSequence = [item]
    return identifier


def findscu_command(port: int, keys: dict[str, str], step: dict[str, str]) -> list[str]:
    command = ["findscu", "-v", "-W", "-aet", "BLR_CT1", "-aec", "CLINIC_MWL"]
    for keyword in RETURN_KEYS:
        command += ["-k", f"{keyword}={keys.get(keyword, '')}"]
    for keyword in STEP_KEYS:
        command += ["-k", f"ScheduledProcedureStepSequence[0].{keyword}={step.get(keyword, '')}"]
    return [*command, "127.0.0.1", str(port)]


# DCMTK's logger with millisecond timestamps: findscu then says when it sent each request and when the final
# response came, so one process on one association times every query (no process start in the figures).
DCMTK_LOG_CONFIG = """log4cplus.rootLogger = INFO, console
log4cplus.appender.console = log4cplus::ConsoleAppender
log4cplus.appender.console.layout = log4cplus::PatternLayout
log4cplus.appender.console.layout.ConversionPattern = %D{%H:%M:%S.%q} %m%n
"""
_LOGGED = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+) (Sending Find Request|Received Final Find Response)")


def findscu_repeated(command: list[str], runs: int) -> tuple[list[float], str]:
    """`runs` C-FINDs by one findscu on one association (--repeat), each timed from its request to its final
    response by findscu's own log; returns the times in ms and the log."""
    with tempfile.NamedTemporaryFile("w", suffix=".cfg") as config:
        config.write(DCMTK_LOG_CONFIG)
        config.flush()
        done = subprocess.run(
            [command[0], "-lc", config.name, "--repeat", str(runs), *command[2:]],
            capture_output=True,
            timeout=600,
            check=True,
        )
    log = (done.stdout + done.stderr).decode("utf-8", "replace")
    times, sent = [], None
    for line in log.splitlines():
        match = _LOGGED.match(line)
        if not match:
            continue
        at = int(match[1]) * 3600 + int(match[2]) * 60 + float(match[3])
        if match[4].startswith("Sending"):
            sent = at
        elif sent is not None:
            times.append(((at - sent) % 86400) * 1000)
            sent = None
    return times, log


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--database", default="clinic_dicom_bench")
    parser.add_argument("--idle", type=int, default=50, help="idle connections held open during the attack runs")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    os.environ["DEBUG"] = "false"  # as production runs: no query log kept per connection
    os.environ["LOG_LEVEL"] = "WARNING"  # the modality side here would log every answer it decodes
    prepare(database=args.database)
    import django

    django.setup()
    from django.db import connection
    from pynetdicom import AE
    from pynetdicom.sop_class import ModalityWorklistInformationFind  # type: ignore[attr-defined]

    from lab.models import ItemStatus, LabOrderItem

    generate(args.items)
    scheduled = LabOrderItem.objects.filter(status=ItemStatus.SCHEDULED)
    print(f"{scheduled.count()} scheduled items, {LabOrderItem.objects.count()} in all; load {os.getloadavg()}")
    sample = scheduled.select_related("order__patient").order_by("?").first()
    assert sample is not None
    day = (datetime.now(IST) + timedelta(days=5)).strftime("%Y%m%d")
    week = f"{day}-{(datetime.now(IST) + timedelta(days=11)).strftime('%Y%m%d')}"
    findscu_shapes: dict[str, tuple[dict[str, str], dict[str, str]]] = {
        "one modality, one station, one day (a modality's worklist)": (
            {},
            {"Modality": "CT", "ScheduledStationAETitle": "BLR_CT1", "ScheduledProcedureStepStartDate": day},
        ),
        "accession number": ({"AccessionNumber": sample.accession_number}, {}),
        "patient id": ({"PatientID": sample.order.patient.patient_id}, {}),
        "every modality, one day": ({}, {"ScheduledProcedureStepStartDate": day}),
        "one modality, a week (capped at 500)": ({}, {"Modality": "CT", "ScheduledProcedureStepStartDate": week}),
    }
    shapes = {label: query(keys, step) for label, (keys, step) in findscu_shapes.items()}
    # The server's own work per C-FIND, in this process: the caller's allow-list row, the SQL, the answers
    # built and encoded as the server writes them (integrations.dicom.encoding; pynetdicom's command sets,
    # its polling reactors and the client excluded).
    from integrations.dicom.encoding import elements_encode
    from integrations.dicom.selectors import calling_ae_allowed
    from integrations.dicom.worklist import answer_elements, query_from_identifier, requested_keys
    from lab.ports import imaging_worklist

    rows: list[dict[str, Any]] = []
    for label, identifier in shapes.items():

        def work(identifier: Any = identifier) -> None:
            caller = calling_ae_allowed(ae_title="BLR_CT1", address="127.0.0.1")
            assert caller is not None
            wanted = query_from_identifier(identifier, branch_id=caller.branch_id, zone=caller.zone)
            keys = requested_keys(identifier)
            for entry in imaging_worklist(wanted, limit=500):
                elements_encode(answer_elements(entry, keys), explicit_vr=False)

        rows.append(measure(f"server work {label}", work, args.runs))
        print(rows[-1])
    # The plan of a modality's query (one modality, one station, one day) as the selector sends it.
    from django.test.utils import CaptureQueriesContext

    caller = calling_ae_allowed(ae_title="BLR_CT1", address="127.0.0.1")
    assert caller is not None
    first = next(iter(shapes.values()))
    with CaptureQueriesContext(connection) as captured:
        imaging_worklist(query_from_identifier(first, branch_id=caller.branch_id, zone=caller.zone), limit=500)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ANALYZE {captured.captured_queries[-1]['sql']}")
        plan = [row[0] for row in cursor.fetchall()]
    print("\n".join(plan))
    connection.close()

    # The modality side sends each PDU at once too (as DCMTK does): pynetdicom's requestor socket leaves
    # Nagle's algorithm on, which holds the C-FIND's identifier back until the server's delayed ACK.
    from pynetdicom import transport

    create_socket = transport.AssociationSocket._create_socket

    def nodelay_socket(self: Any, address: Any) -> Any:
        sock = create_socket(self, address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    transport.AssociationSocket._create_socket = nodelay_socket  # type: ignore[method-assign]

    port = free_port()
    env = {**os.environ, "LOG_LEVEL": "WARNING", "DICOM_WORKLIST_MAX_RESULTS": "500"}
    server = subprocess.Popen(
        [sys.executable, "manage.py", "dicom_worklist", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env
    )
    try:
        ae = AE(ae_title="BLR_CT1")
        ae.add_requested_context(ModalityWorklistInformationFind)
        for _ in range(100):
            assoc = ae.associate("127.0.0.1", port, ae_title="CLINIC_MWL")
            if assoc.is_established:
                break
            time.sleep(0.2)
        assert assoc.is_established, "the worklist did not start"
        for label, identifier in shapes.items():
            answers: list[int] = []

            def find(identifier: Any = identifier, answers: list[int] = answers) -> None:
                count = 0
                for status, found in assoc.send_c_find(identifier, ModalityWorklistInformationFind):
                    if status and status.Status == 0xFF00 and found is not None:
                        count += 1
                    elif not status or status.Status != 0x0000:
                        raise RuntimeError(f"C-FIND failed: {status}")
                answers.append(count)

            row = measure(f"C-FIND {label}", find, args.runs)
            row["answers"] = answers[-1]
            rows.append(row)
            print(row)
        assoc.release()
        for label, (keys, step) in findscu_shapes.items():
            command = findscu_command(port, keys, step)
            findscu_repeated(command, min(20, args.runs))  # warm-up
            times, log = findscu_repeated(command, args.runs)
            assert len(times) == args.runs, log[-2000:]
            rows.append(
                {
                    "endpoint": f"findscu, one association, {label}",
                    "requests": len(times),
                    "p50_ms": round(percentile(times, 0.5), 2),
                    "p95_ms": round(percentile(times, 0.95), 2),
                    "p99_ms": round(percentile(times, 0.99), 2),
                    "throughput_rps": round(len(times) / (sum(times) / 1000), 1),
                    "answers": log.count("(Pending)") // args.runs,
                }
            )
            print(rows[-1])
        for label, (keys, step) in findscu_shapes.items():
            command = findscu_command(port, keys, step)
            answers = []

            def run(command: list[str] = command, answers: list[int] = answers) -> None:
                done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
                answers.append((done.stdout + done.stderr).count("(Pending)"))

            row = measure(f"findscu {label}", run, args.runs)
            row["answers"] = answers[-1]
            rows.append(row)
            print(row)
        rows += under_idle_connections(port, args.idle, min(args.runs, 50), shapes["accession number"], sample)
    finally:
        server.terminate()
        server.wait(20)
    write("dicom_worklist", rows)
    with (RESULTS / "dicom_worklist.plan.txt").open("w") as out:
        out.write("\n".join(plan) + "\n")
    return 0


class IdleAttacker:
    """`count` connections that never send a byte, one per loopback address from 127.0.0.2, each reopened as
    soon as the server closes it, until stopped."""

    def __init__(self, port: int, count: int) -> None:
        import threading

        self.port, self.count = port, count
        self.sockets: dict[int, socket.socket] = {}
        self.reopened = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self, number: int) -> None:
        idle = socket.socket()
        idle.bind((f"127.0.{2 + number // 250}.{2 + number % 250}", 0))
        idle.connect(("127.0.0.1", self.port))
        self.sockets[number] = idle

    def __enter__(self) -> IdleAttacker:
        # Its own process: the attacker's reconnecting must not take the measured client's interpreter.
        import multiprocessing

        self._process = multiprocessing.get_context("fork").Process(target=self._attack, daemon=True)
        self._process.start()
        time.sleep(1)
        return self

    def _attack(self) -> None:
        for number in range(self.count):
            self._open(number)
        self._thread.start()
        self._thread.join()

    def _run(self) -> None:
        import select

        while not self._stop.is_set():
            readable, _, _ = select.select(list(self.sockets.values()), [], [], 0.05)
            for number, idle in list(self.sockets.items()):
                if idle in readable:  # closed by the server (ARTIM or evicted): come back at once
                    idle.close()
                    self._open(number)
                    self.reopened += 1
                    if self.reopened % 1000 == 0:
                        print(f"idle connections reopened after the server closed them: {self.reopened}")

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(10)


def under_idle_connections(port: int, idle: int, runs: int, one_item: Any, sample: Any) -> list[dict[str, Any]]:
    """A new association per C-ECHO and per one-item C-FIND (pynetdicom, echoscu, findscu) while `idle`
    connections are held open against the worklist."""
    from pynetdicom import AE
    from pynetdicom.sop_class import ModalityWorklistInformationFind, Verification  # type: ignore[attr-defined]

    ae = AE(ae_title="BLR_CT1")
    ae.add_requested_context(Verification)
    ae.add_requested_context(ModalityWorklistInformationFind)

    def echo() -> None:
        assoc = ae.associate("127.0.0.1", port, ae_title="CLINIC_MWL")
        assert assoc.is_established, "C-ECHO association refused"
        assert assoc.send_c_echo().Status == 0
        assoc.release()

    def find() -> None:
        assoc = ae.associate("127.0.0.1", port, ae_title="CLINIC_MWL")
        assert assoc.is_established, "C-FIND association refused"
        found = [s for s, _ in assoc.send_c_find(one_item, ModalityWorklistInformationFind) if s.Status == 0xFF00]
        assert len(found) == 1
        assoc.release()

    def echoscu() -> None:
        command = ["echoscu", "-aet", "BLR_CT1", "-aec", "CLINIC_MWL", "127.0.0.1", str(port)]
        subprocess.run(command, capture_output=True, timeout=60, check=True)

    def findscu() -> None:
        command = findscu_command(port, {"AccessionNumber": sample.accession_number}, {})
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
        assert (done.stdout + done.stderr).count("(Pending)") == 1

    rows = []
    with IdleAttacker(port, idle):
        for label, call in (
            ("C-ECHO (pynetdicom, new association)", echo),
            ("C-FIND one item (pynetdicom, new association)", find),
            ("echoscu (process)", echoscu),
            ("findscu one item (process)", findscu),
        ):
            row = measure(f"{idle} idle connections: {label}", call, runs)
            row["max_ms"] = row["p99_ms"]
            rows.append(row)
            print(row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
