"""CPU cost of one request through the whole Django stack, measured in-process and robust to a busy machine.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/request_floor.py [--requests 300] [--profile]

Calls the WSGI application (`clinic.wsgi.application`, DEBUG off, as gunicorn serves it) in a loop with
prepared environs and reports, per scenario, the worker's CPU milliseconds per request (process_time:
user + system of this process, so PostgreSQL's and Redis's own CPU are not counted, and other load on the
machine does not inflate it), the wall milliseconds (for reference only: noisy on a shared machine) and
the SQL statements per request. Scenarios: the framework floor (GET /api/v1/branches), the token exchange
(client credentials), a patient profile and a booking of a distinct free slot each time. The database is
the demo data (`seed_demo`, run when it holds no patient). With --profile, writes cProfile text (the
functions by own and cumulative time) of the floor and of a booking to bench/results/profiles/.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "bench" / "results" / "profiles"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
os.environ["DEBUG"] = "false"
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1")
os.environ.setdefault("LOG_LEVEL", "WARNING")

from harness import bench_client  # noqa: E402 - after the path and environment above

Call = Callable[[], tuple[int, bytes]]


def environ(method: str, path: str, *, body: bytes = b"", headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A WSGI environ as gunicorn builds it for a request from 127.0.0.1."""
    path, _, query = path.partition("?")
    env: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_USER_AGENT": "request-floor",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.errors": sys.stderr,
        "CONTENT_LENGTH": str(len(body)),
    }
    for name, value in (headers or {}).items():
        key = name.upper().replace("-", "_")
        env[key if key == "CONTENT_TYPE" else f"HTTP_{key}"] = value
    env["_body"] = body
    return env


def caller(app: Any, env: dict[str, Any]) -> Call:
    body = env.pop("_body")

    def call() -> tuple[int, bytes]:
        statuses: list[str] = []
        request_env = {**env, "wsgi.input": io.BytesIO(body)}
        chunks = app(request_env, lambda status, headers, exc_info=None: statuses.append(status))
        try:
            content = b"".join(chunks)
        finally:
            getattr(chunks, "close", lambda: None)()
        return int(statuses[0].split()[0]), content

    return call


@contextmanager
def counting_queries() -> Iterator[list[int]]:
    from django.db import connection

    count = [0]

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        count[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield count


def measure(name: str, calls: list[Call], count: int, expect: int) -> dict[str, Any]:
    for call in calls[: min(20, len(calls))]:  # warm-up: imports, caches, connections
        status, content = call()
        assert status == expect, (name, status, content[:300])
    cpu: list[float] = []
    wall: list[float] = []
    with counting_queries() as queries:
        for i in range(count):
            call = calls[(i + 20) % len(calls)]
            c0, w0 = time.process_time(), time.perf_counter()
            status, content = call()
            cpu.append((time.process_time() - c0) * 1000)
            wall.append((time.perf_counter() - w0) * 1000)
            assert status == expect, (name, status, content[:300])
    return {
        "scenario": name,
        "requests": count,
        "cpu_ms_mean": round(statistics.fmean(cpu), 3),
        "cpu_ms_p50": round(statistics.median(cpu), 3),
        "wall_ms_p50": round(statistics.median(wall), 3),
        "queries": round(queries[0] / count, 2),
    }


def profile(name: str, calls: list[Call], count: int) -> None:
    PROFILES.mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile(time.process_time)  # CPU time: waits on PostgreSQL do not count
    profiler.enable()
    for i in range(count):
        calls[i % len(calls)]()
    profiler.disable()
    out = io.StringIO()
    out.write(f"# {name}: cProfile (CPU time) over {count} requests (bench/request_floor.py --profile)\n")
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    out.write("\n## by own time\n")
    stats.sort_stats("tottime").print_stats(40)
    out.write("\n## by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(60)
    (PROFILES / f"{name}.txt").write_text(out.getvalue())


def build(app: Any, count: int) -> dict[str, tuple[list[Call], int]]:
    from django.core.management import call_command
    from django.utils import timezone

    from appointments.models import Appointment
    from clinic.models import Doctor
    from patients.models import Patient

    if not Patient.objects.exists():
        call_command("seed_demo", stdout=io.StringIO())
    client = bench_client("patients:read appointments:read appointments:write")
    basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
    token_env = environ(
        "POST",
        "/api/v1/auth/token",
        body=b"grant_type=client_credentials",
        headers={"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded"},
    )
    status, content = caller(app, dict(token_env))()
    assert status == 200, content
    bearer = {"Authorization": f"Bearer {json.loads(content)['access_token']}"}

    def get(path: str) -> Call:
        return caller(app, environ("GET", path, headers=bearer))

    patients = [str(p) for p in Patient.objects.order_by("patient_id").values_list("id", flat=True)[:20]]
    # Bookings: distinct free cells (from the slots API) on days past every existing appointment, each with
    # a patient in turn; one more call than measured, so none is repeated.
    last = Appointment.objects.order_by("-local_date").values_list("local_date", flat=True).first()
    today = timezone.localdate()
    day = max(last or today, today) + timedelta(days=7)
    cells: list[dict[str, str]] = []
    doctors = list(Doctor.objects.filter(is_active=True).prefetch_related("branches"))
    while len(cells) < count + 40:
        for doctor in doctors:
            for branch in doctor.branches.all():
                query = f"doctor_id={doctor.id}&branch_id={branch.id}&date={day.isoformat()}"
                status, content = get(f"/api/v1/appointments/slots?{query}")()
                assert status == 200, content
                cells += [
                    {
                        "doctor_id": str(doctor.id),
                        "branch_id": str(branch.id),
                        "slot_start": slot["start_time"],
                        "slot_end": slot["end_time"],
                    }
                    for slot in json.loads(content)
                ]
        day += timedelta(days=1)
    # One patient per doctor and branch: a doctor's cells never overlap, so neither do the patient's.
    pairs: dict[tuple[str, str], int] = {}
    bookings = []
    for cell in cells:
        nth = pairs.setdefault((cell["doctor_id"], cell["branch_id"]), len(pairs))
        body = json.dumps({"patient_id": patients[nth % len(patients)], **cell}).encode()
        headers = {**bearer, "Content-Type": "application/json"}
        bookings.append(caller(app, environ("POST", "/api/v1/appointments", body=body, headers=headers)))
    return {
        "floor": ([get("/api/v1/branches")], 200),
        "token": ([caller(app, dict(token_env))], 200),
        "profile": ([get(f"/api/v1/patients/{p}") for p in patients], 200),
        "booking": (bookings, 201),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--profile", action="store_true", help="also write cProfile text to bench/results/profiles")
    parser.add_argument("--label", default="", help="suffix of the profile files (before, after)")
    args = parser.parse_args()

    import django

    django.setup()
    from clinic.wsgi import application

    scenarios = build(application, args.requests * (2 if args.profile else 1))
    rows = []
    for name, (calls, expect) in scenarios.items():
        if name == "booking":
            measured, rest = calls[: args.requests + 20], calls[args.requests + 20 :]
            rows.append(measure(name, measured, args.requests, expect))
        else:
            rows.append(measure(name, calls, args.requests, expect))
            rest = calls
        if args.profile and name in ("floor", "booking", "token", "profile"):
            count = min(len(rest), args.requests) if name == "booking" else args.requests
            profile(f"{name}{'-' + args.label if args.label else ''}", rest, count)
    print("| scenario | requests | CPU ms/request (mean) | CPU ms p50 | wall ms p50 | SQL statements |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['scenario']} | {r['requests']} | {r['cpu_ms_mean']} | {r['cpu_ms_p50']} | {r['wall_ms_p50']} "
            f"| {r['queries']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
