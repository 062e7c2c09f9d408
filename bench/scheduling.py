"""Slots latency (concurrency 1) and booking throughput (concurrency 16 across doctors) under gunicorn.

    .venv/bin/python bench/scheduling.py [--doctors 40] [--bookings 2000] [--workers 4]

Uses its own database (clinic_bench_appt). Each doctor consults 00:00-24:00 every day in 5-minute cells;
bookings go to distinct cells of a future day, round-robin over doctors, so every 201 is a real booking.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import requests
from harness import bench_client, gunicorn, measure, prepare, token, write


def setup(doctors: int) -> tuple[list[str], list[str], str]:
    import django

    django.setup()
    from datetime import time as dtime

    from appointments.models import WeeklySession
    from clinic.models import Branch, Department, Doctor
    from patients.devdata.demo import bench_patients_build, bulk_insert
    from patients.models import Patient

    branch, _ = Branch.objects.get_or_create(code="BEN", defaults={"name": "Bench", "state": "Karnataka"})
    department, _ = Department.objects.get_or_create(name="Bench")
    existing = Doctor.objects.filter(department=department).count()
    for n in range(existing, doctors):
        doctor = Doctor.objects.create(name=f"Dr. Bench {n:03d}", department=department, default_slot_minutes=5)
        doctor.branches.set([branch])
        WeeklySession.objects.bulk_create(
            WeeklySession(doctor=doctor, branch=branch, weekday=w, start=dtime(0, 0), end=dtime(23, 59))
            for w in range(7)
        )
    if Patient.objects.count() < 5000:
        bulk_insert(bench_patients_build(5000, branches=[branch], start_number=Patient.objects.count() + 1, seed=3))
    doctor_ids = [str(d) for d in Doctor.objects.filter(department=department).values_list("id", flat=True)[:doctors]]
    patient_ids = [str(p) for p in Patient.objects.values_list("id", flat=True)[:5000]]
    return doctor_ids, patient_ids, str(branch.id)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--doctors", type=int, default=40)
    parser.add_argument("--bookings", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    server = prepare(database="clinic_bench_appt")
    doctors, patients, branch_id = setup(args.doctors)
    client = bench_client("appointments:read appointments:write")
    # A fresh future day per run, so earlier runs' bookings do not fill it.
    day = datetime.now(UTC).date() + timedelta(days=30 + int(time.time()) % 300)
    with gunicorn(workers=args.workers) as base:
        session = requests.Session()
        headers = {"Authorization": f"Bearer {token(session, base, client)}"}

        def slots_of(doctor: str) -> Callable[[], None]:
            def call() -> None:
                session.get(
                    f"{base}/api/v1/appointments/slots",
                    params={"doctor_id": doctor, "date": day.isoformat()},
                    headers=headers,
                ).raise_for_status()

            return call

        rows = [measure("GET /api/v1/appointments/slots (288 cells)", [slots_of(d) for d in doctors], args.requests)]
        jobs: queue.Queue[tuple[str, str, int]] = queue.Queue()
        for n in range(args.bookings):
            jobs.put((doctors[n % len(doctors)], patients[n % len(patients)], n // len(doctors)))
        statuses: list[int] = []
        lock = threading.Lock()

        def worker() -> None:
            own = requests.Session()
            while True:
                try:
                    doctor, patient, cell = jobs.get_nowait()
                except queue.Empty:
                    return
                minutes = cell * 5
                slot_start = f"{day.isoformat()}T{minutes // 60:02d}:{minutes % 60:02d}:00+05:30"
                end_minutes = minutes + 5
                slot_end = f"{day.isoformat()}T{end_minutes // 60:02d}:{end_minutes % 60:02d}:00+05:30"
                body = {
                    "patient_id": patient,
                    "doctor_id": doctor,
                    "branch_id": branch_id,
                    "slot_start": slot_start,
                    "slot_end": slot_end,
                }
                response = own.post(f"{base}/api/v1/appointments", json=body, headers=headers)
                with lock:
                    statuses.append(response.status_code)

        threads = [threading.Thread(target=worker) for _ in range(16)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        created = statuses.count(201)
        rows.append(
            {
                "endpoint": "POST /api/v1/appointments (16 threads, distinct cells)",
                "requests": len(statuses),
                "p50_ms": "-",
                "p95_ms": "-",
                "p99_ms": "-",
                "throughput_rps": round(created / elapsed, 1),
            }
        )
        print(f"bookings: {created} created, other statuses {sorted(set(statuses) - {201})}, {elapsed:.1f} s")
    del server
    write("scheduling", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
