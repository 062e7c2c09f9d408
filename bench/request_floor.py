"""CPU cost of one request through the whole Django stack, measured in-process and robust to a busy machine.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/request_floor.py [--requests 300] [--only a,b]
        [--json PATH] [--profile --label before]
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/request_floor.py --ab BEFORE_DIR AFTER_DIR
        [--requests 200] [--rounds 2] [--before-label ..] [--after-label ..] [--heading ..] [--json PATH]

Calls the WSGI application (`clinic.wsgi.application`, DEBUG off, as gunicorn serves it) in a loop with
prepared environs and reports, per scenario, the worker's CPU milliseconds per request (process_time:
user + system of this process, so PostgreSQL's and Redis's own CPU are not counted, and other load on the
machine does not inflate it much), the wall milliseconds (for reference only: noisy on a shared machine) and
the SQL statements per request. Scenarios (`SCENARIOS`): the framework floor (GET /api/v1/branches), the
token exchange (client credentials), the patient profile by UUID and by business patient_id, an invoice's
detail, a branch's billing summary, a lab order's detail, one patient's lab order list, a doctor's detail,
a doctor's free slots for a day, a booking of a distinct free slot each time and results posted to a
distinct collected lab order each time. The database is the demo data (`seed_demo`, run when it holds no
patient); every id is chosen at start from it in a fixed order, so two trees (two commits) run against the
same database send the same requests (the booking cells and the lab orders receiving results are made
fresh, the same way, by each). A GET scenario's response bodies are hashed, so an A/B also shows whether
the answers changed. With --profile, writes cProfile text (the functions by own and cumulative time) of
the floor, the token exchange, the profile and a booking to bench/results/profiles/.

--ab runs this script in two trees (a `git archive` of the before commit with this harness copied in, and
the checkout: bench/plans_ab.sh prepares them) and alternates them in blocks of requests; see `ab` below.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import hashlib
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "bench" / "results" / "profiles"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
os.environ["DEBUG"] = "false"
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# The token scenario asks for thousands of tokens a minute: past the per-client token budget (60 a minute by
# default), which is what it measures the cost of, not what it should be refused by.
os.environ.setdefault("TOKEN_RATE_LIMIT", "100000")

Call = Callable[[], tuple[int, bytes]]
WARM_UP = 20

# name: what it requests (the table's second column). The order is the order of measurement.
SCENARIOS: dict[str, str] = {
    "floor": "GET /api/v1/branches",
    "token": "POST /api/v1/auth/token (client credentials)",
    "profile": "GET /api/v1/patients/{uuid} (profile), 20 patients",
    "profile_by_key": "GET /api/v1/patients/{PAT-id} (profile), 20 patients",
    "invoice": "GET /api/v1/billing/invoices/{id}, every demo invoice",
    "billing_summary": "GET /api/v1/billing/summary?branch_id=..&date_from=..&date_to=.. (one branch)",
    "lab_order": "GET /api/v1/lab/orders/{id}, every demo order",
    "lab_orders_patient": "GET /api/v1/lab/orders?patient_id={PAT-id} (one patient)",
    "doctor": "GET /api/v1/doctors/{id}, every active doctor",
    "slots": "GET /api/v1/appointments/slots?doctor_id=..&branch_id=..&date=.. (each doctor and branch)",
    "booking": "POST /api/v1/appointments (a distinct free cell each)",
    "lab_results": "POST /api/v1/lab/orders/{id}/results (4 CBC results, final; a distinct order each)",
}
# Scenarios whose every request needs a target of its own (a free cell, a collected order): count + WARM_UP
# of them are made at start (twice as many with --profile).
FRESH = ("booking", "lab_results")
# Not compared by response body: a new token, a new appointment or result each time.
NO_DIGEST = ("token", *FRESH)


@dataclass
class Scenario:
    calls: list[Call]
    expect: int
    targets: list[str]  # what the calls request, for the A/B's check that both sides sent the same


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


def warm_up(name: str, scenario: Scenario) -> str | None:
    """The first WARM_UP calls (imports, caches, connections, prepared statements); the hash of their response
    bodies (each distinct GET once when there are at most WARM_UP of them), None for NO_DIGEST."""
    digest = hashlib.sha256()
    for call in scenario.calls[: min(WARM_UP, len(scenario.calls))]:
        status, content = call()
        assert status == scenario.expect, (name, status, content[:300])
        digest.update(content)
    return None if name in NO_DIGEST else digest.hexdigest()[:16]


def run(name: str, scenario: Scenario, start: int, count: int) -> dict[str, Any]:
    """`count` measured calls from the `start`-th (cycling through the calls; a FRESH scenario's are never
    reused): CPU and wall milliseconds of each, and the SQL statements of all."""
    calls, expect = scenario.calls, scenario.expect
    assert name not in FRESH or start + count <= len(calls), f"{name}: {len(calls)} targets made, too few"
    cpu: list[float] = []
    wall: list[float] = []
    with counting_queries() as queries:
        for i in range(start, start + count):
            call = calls[i % len(calls)]
            c0, w0 = time.process_time(), time.perf_counter()
            status, content = call()
            cpu.append((time.process_time() - c0) * 1000)
            wall.append((time.perf_counter() - w0) * 1000)
            assert status == expect, (name, status, content[:300])
    return {"cpu": cpu, "wall": wall, "queries": queries[0]}


def summary(name: str, cpu: list[float], wall: list[float], queries: int) -> dict[str, Any]:
    return {
        "scenario": name,
        "requests": len(cpu),
        "cpu_ms_mean": round(statistics.fmean(cpu), 3),
        "cpu_ms_p50": round(statistics.median(cpu), 3),
        "wall_ms_p50": round(statistics.median(wall), 3),
        "queries": round(queries / len(cpu), 2),
    }


def targets(scenario: Scenario) -> str:
    return hashlib.sha256("\n".join(scenario.targets).encode()).hexdigest()[:16]


def measure(name: str, scenario: Scenario, count: int) -> dict[str, Any]:
    digest = warm_up(name, scenario)
    block = run(name, scenario, WARM_UP, count)
    return {
        **summary(name, block["cpu"], block["wall"], block["queries"]),
        "digest": digest,
        "targets": targets(scenario),
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


def build(app: Any, fresh: int, only: set[str], booking_days: tuple[int, int] = (0, 0)) -> dict[str, Scenario]:
    """The scenarios named in `only`, with `fresh` targets for each of FRESH. Every id comes from the demo
    data in a fixed order; the targets the benchmark makes itself (booking cells, lab orders for results) are
    made through the API, so both sides of an A/B make them the same way, and touch nothing another scenario
    reads (bookings land on days past every appointment, the results' orders belong to a patient whose lab
    orders no scenario lists)."""
    from django.core.management import call_command
    from django.utils import timezone
    from harness import bench_client  # imports the project: not needed by --ab

    from appointments.models import Appointment
    from billing.models import Invoice
    from clinic.models import Branch, Doctor
    from lab.models import LabOrder
    from patients.models import Patient

    if not Patient.objects.exists():
        call_command("seed_demo", stdout=io.StringIO())
    client = bench_client(
        "patients:read appointments:read appointments:write billing:read lab:read lab:write",
    )
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
    json_headers = {**bearer, "Content-Type": "application/json"}

    def get(path: str) -> Call:
        return caller(app, environ("GET", path, headers=bearer))

    def post(path: str, body: dict[str, Any]) -> Call:
        return caller(app, environ("POST", path, body=json.dumps(body).encode(), headers=json_headers))

    def gets(paths: list[str]) -> Scenario:
        return Scenario([get(path) for path in paths], 200, paths)

    # The demo's patients, invoices, lab orders and doctors, in a fixed order.
    demo_patients = list(Patient.objects.order_by("patient_id")[:20])
    patients = [str(p.id) for p in demo_patients]
    demo_orders = LabOrder.objects.filter(ordered_by="seed_demo").order_by("order_number")
    listed = demo_orders.filter(status="final").select_related("patient").first() or demo_orders.first()
    assert listed is not None, "the demo data has no lab orders"
    doctors = list(Doctor.objects.filter(is_active=True).order_by("name", "id").prefetch_related("branches"))
    scenarios: dict[str, Scenario] = {}
    if "floor" in only:
        scenarios["floor"] = gets(["/api/v1/branches"])
    if "token" in only:
        scenarios["token"] = Scenario([caller(app, dict(token_env))], 200, ["/api/v1/auth/token"])
    if "profile" in only:
        scenarios["profile"] = gets([f"/api/v1/patients/{p}" for p in patients])
    if "profile_by_key" in only:
        scenarios["profile_by_key"] = gets([f"/api/v1/patients/{p.patient_id}" for p in demo_patients])
    if "invoice" in only:
        invoices = Invoice.objects.order_by("branch__code", "date", "invoice_number", "id").values_list("id", flat=True)
        scenarios["invoice"] = gets([f"/api/v1/billing/invoices/{i}" for i in invoices[:20]])
    if "billing_summary" in only:
        branch = Branch.objects.order_by("code").first()
        assert branch is not None
        dates = list(Invoice.objects.filter(branch=branch).order_by("date").values_list("date", flat=True))
        query = f"branch_id={branch.id}&date_from={dates[0].isoformat()}&date_to={dates[-1].isoformat()}"
        scenarios["billing_summary"] = gets([f"/api/v1/billing/summary?{query}"])
    if "lab_order" in only:
        scenarios["lab_order"] = gets([f"/api/v1/lab/orders/{o}" for o in demo_orders.values_list("id", flat=True)])
    if "lab_orders_patient" in only:
        scenarios["lab_orders_patient"] = gets([f"/api/v1/lab/orders?patient_id={listed.patient.patient_id}"])
    if "doctor" in only:
        scenarios["doctor"] = gets([f"/api/v1/doctors/{d.id}" for d in doctors])
    today = timezone.localdate()
    if "slots" in only:
        # Each doctor and branch on the first of the next six days with free cells (tomorrow holds some of the
        # demo's appointments): bookings land a week or more ahead, so the same days answer the same all run.
        paths = []
        for doctor in doctors:
            for branch in sorted(doctor.branches.all(), key=lambda b: b.code):
                for ahead in range(1, 7):
                    day = today + timedelta(days=ahead)
                    path = f"/api/v1/appointments/slots?doctor_id={doctor.id}&branch_id={branch.id}&date={day}"
                    status, content = get(path)()
                    assert status == 200, content
                    if json.loads(content):
                        paths.append(path)
                        break
        assert paths, "no doctor has free cells in the next six days"
        scenarios["slots"] = gets(paths)
    if "booking" in only:
        scenarios["booking"] = _bookings(get, post, doctors, patients, today, fresh, Appointment, booking_days)
    if "lab_results" in only:
        # Orders of a demo patient no scenario lists the lab orders of (the last with no demo order), at its
        # branch, by the first doctor working there; placed and collected through the API.
        with_orders = set(demo_orders.values_list("patient_id", flat=True))
        patient = next(p for p in reversed(demo_patients) if p.id not in with_orders and p.id != listed.patient_id)
        branch_id = patient.registration_branch_id
        doctor = next(d for d in doctors if any(b.id == branch_id for b in d.branches.all()))
        body = {"patient_id": patient.patient_id, "branch_id": str(branch_id), "doctor_id": str(doctor.id)}
        results = {
            "results": [
                {"test": "CBC", "analyte": "HGB", "value": "14.1", "unit": "g/dL"},
                {"test": "CBC", "analyte": "WBC", "value": "7.2"},
                {"test": "CBC", "analyte": "PLT", "value": "250"},
                {"test": "CBC", "analyte": "HCT", "value": "42"},
            ],
            "performed_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
            "performer": "request-floor",
            "status": "final",
        }
        calls = []
        for _ in range(fresh):
            status, content = post("/api/v1/lab/orders", {**body, "tests": ["CBC"], "bill": False})()
            assert status == 201, content
            order = json.loads(content)["order_id"]
            status, content = post(f"/api/v1/lab/orders/{order}/collect", {})()
            assert status == 200, content
            calls.append(post(f"/api/v1/lab/orders/{order}/results", results))
        target = f"patient {patient.patient_id} at {branch_id} by {doctor.id}: CBC, 4 results"
        scenarios["lab_results"] = Scenario(calls, 201, [target])
    return {name: scenarios[name] for name in SCENARIOS if name in scenarios}


def _bookings(
    get: Callable[[str], Call],
    post: Callable[[str, dict[str, Any]], Call],
    doctors: list[Any],
    patients: list[str],
    today: Any,
    fresh: int,
    appointments: Any,
    booking_days: tuple[int, int],
) -> Scenario:
    """Distinct free cells (from the slots API) on days past every existing appointment, each with a patient
    in turn; `fresh` of them (one for each call: none is repeated). `booking_days` (offset, window): start
    that many days later and stay within the window (0: none), so the two sides of --ab, set up before either
    books, take cells of their own."""
    offset, window = booking_days
    last = appointments.objects.order_by("-local_date").values_list("local_date", flat=True).first()
    first = day = max(last or today, today) + timedelta(days=7 + offset)
    cells: list[dict[str, str]] = []
    while len(cells) < fresh + 20:
        assert not window or day < first + timedelta(days=window), f"fewer than {fresh} free cells in {window} days"
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
    calls = []
    for cell in cells:
        nth = pairs.setdefault((cell["doctor_id"], cell["branch_id"]), len(pairs))
        calls.append(post("/api/v1/appointments", {"patient_id": patients[nth % len(patients)], **cell}))
    return Scenario(calls, 201, [f"{len(pairs)} doctor-branch pairs, patients {patients[0]}.."])


# --- Before and after, interleaved (bench/plans_ab.sh) ------------------------------------------------------
#
# --ab BEFORE_DIR AFTER_DIR starts, each round, this script with --serve in each tree (one new process per
# side, set up one after the other, then both alive), and alternates them block by block: for every scenario,
# blocks of BLOCK requests, before-after then after-before in turn, so the two sides share the machine's load
# of the same minute. Each side measures its own process_time; only one side runs at a time (the other waits
# on its pipe). The coordinator needs no database itself and does not import the project.

BLOCK = 50


def serve(args: argparse.Namespace, only: set[str]) -> int:
    """Set up the scenarios and warm them up, answer `{"ready": ..}`, then one line per request line: a block
    `{"scenario": name, "count": n}` measured, as `{"cpu": [..], "wall": [..], "queries": n}`."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed (seed_demo, logging) goes to stderr, not into the channel
    sys.stdout = sys.stderr
    application = _application()
    fresh = args.requests + WARM_UP
    offset, _, window = args.booking_days.partition(":")
    scenarios = build(application, fresh, only, (int(offset), int(window or 0)))
    ready = {
        name: {"digest": warm_up(name, scenario), "targets": targets(scenario)} for name, scenario in scenarios.items()
    }
    channel.write(json.dumps({"ready": ready, "root": str(ROOT)}) + "\n")
    position = dict.fromkeys(scenarios, WARM_UP)
    for line in sys.stdin:
        asked = json.loads(line)
        name, count = asked["scenario"], asked["count"]
        block = run(name, scenarios[name], position[name], count)
        position[name] += count
        channel.write(json.dumps(block) + "\n")
    return 0


class Side:
    def __init__(self, name: str, directory: Path, args: argparse.Namespace, booking_days: str) -> None:
        import subprocess

        command = [sys.executable, "bench/request_floor.py", "--serve", "--requests", str(args.requests)]
        command += ["--booking-days", booking_days] + (["--only", args.only] if args.only else [])
        print(f"== {name}: setting up in {directory}", file=sys.stderr)
        self.name = name
        # The same string hashes on both sides: with a random seed each process's dicts and sets differ in
        # layout; two processes of the same code then differed steadily by up to 0.7 ms in a scenario
        # (2026-11-28), and by about 0.2 ms at most with the seed fixed.
        env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
        self.process = subprocess.Popen(
            command, cwd=directory, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        ready = self._read()
        self.scenarios: dict[str, dict[str, Any]] = ready["ready"]
        assert Path(ready["root"]) == directory.resolve(), (ready["root"], directory)

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.name} side exited ({self.process.wait()}); its errors are above")
        return dict(json.loads(line))

    def block(self, scenario: str, count: int) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"scenario": scenario, "count": count}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(60)


def ab(args: argparse.Namespace, before_dir: Path, after_dir: Path) -> dict[str, Any]:
    """Each round a new process per side (set up in turn, the before side first in odd rounds), then for each
    scenario blocks of BLOCK requests, before-after and after-before in turn."""
    directories = {"before": before_dir, "after": after_dir}
    # A round's after side books from 8 weeks later (the same weekdays) than its before side, which must not
    # need more days; the next round's sides start past both.
    weeks = 8
    booking_days = {"before": f"0:{7 * weeks}", "after": f"{7 * weeks}:{7 * weeks}"}
    started = datetime.now(UTC).isoformat(timespec="seconds")
    loadavg = " ".join(f"{v:.2f}" for v in os.getloadavg())
    samples: dict[str, dict[int, dict[str, Any]]] = {"before": {}, "after": {}}
    scenarios: dict[str, dict[int, dict[str, Any]]] = {"before": {}, "after": {}}
    for round_ in range(1, args.rounds + 1):
        print(f"== round {round_}", file=sys.stderr)
        first = ("before", "after") if round_ % 2 else ("after", "before")
        sides = {name: Side(name, directories[name], args, booking_days[name]) for name in first}
        names = [name for name in SCENARIOS if name in sides["before"].scenarios]
        assert names == [name for name in SCENARIOS if name in sides["after"].scenarios]
        for name in names:
            for side in sides:
                samples[side].setdefault(round_, {})[name] = {"cpu": [], "wall": [], "queries": 0}
            done, turn = 0, round_
            while done < args.requests:
                count = min(BLOCK, args.requests - done)
                for side in ("before", "after") if turn % 2 else ("after", "before"):
                    block = sides[side].block(name, count)
                    into = samples[side][round_][name]
                    into["cpu"] += block["cpu"]
                    into["wall"] += block["wall"]
                    into["queries"] += block["queries"]
                done, turn = done + count, turn + 1
        for side, process in sides.items():
            process.close()
            scenarios[side][round_] = process.scenarios
    return {
        "started": started,
        "ended": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg": loadavg,
        "loadavg_end": " ".join(f"{v:.2f}" for v in os.getloadavg()),
        "machine": _machine(),
        "requests": args.requests,
        "rounds": args.rounds,
        "scenarios": scenarios,
        "rows": {
            side: {
                round_: {name: summary(name, **measured) for name, measured in by_name.items()}
                for round_, by_name in by_round.items()
            }
            for side, by_round in samples.items()
        },
    }


def _cell(row: dict[str, Any]) -> str:
    return f"{row['cpu_ms_mean']:.2f} ({row['cpu_ms_p50']:.2f})"


def _statements(values: list[float]) -> str:
    distinct = sorted(set(values), key=values.index)
    return " / ".join(f"{v:g}" for v in distinct)


def ab_table(result: dict[str, Any], args: argparse.Namespace) -> str:
    rows, scenarios = result["rows"], result["scenarios"]
    rounds = sorted(rows["before"])
    names = [name for name in SCENARIOS if name in rows["before"][rounds[0]]]
    runs = [scenarios[side][n] for side in ("before", "after") for n in rounds]
    guard = args.guard
    lines = [
        f"# {args.heading}",
        "",
        f"- before: {args.before_label}",
        f"- after: {args.after_label}",
        f"- {result['started']} to {result['ended']}; {len(rounds)} rounds of {result['requests']} requests per "
        f"scenario and side, after {WARM_UP} warm-up calls; each round a new process per side (PYTHONHASHSEED "
        f"fixed), the sides alternating in blocks of {BLOCK} requests (before-after, then after-before); the "
        "same database.",
        f"- machine: {result['machine']}; load average {result['loadavg']} at the start, "
        f"{result['loadavg_end']} at the end.",
        "- CPU ms per request: `time.process_time` of the process serving in-process (user + system; PostgreSQL's "
        "own CPU not counted), mean (p50). Δ: after - before, of the means, by round. SQL statements per "
        "request: before -> after (two values when the rounds differ). Same response: the warm-up's response "
        "bodies hashed, equal on both sides in every round (`-`: a new token, appointment or result each time).",
        "",
        "| scenario | request | "
        + " | ".join(f"before {n} | after {n}" for n in rounds)
        + " | "
        + " | ".join(f"Δ {n}" for n in rounds)
        + f" | within +{guard:g} ms | SQL statements | same response |",
        "|---|---|" + "---|---|" * len(rounds) + "---|" * len(rounds) + "---|---|---|",
    ]
    mismatched = []
    for name in names:
        cells, deltas = [], []
        for n in rounds:
            b, a = rows["before"][n][name], rows["after"][n][name]
            cells += [_cell(b), _cell(a)]
            deltas.append(a["cpu_ms_mean"] - b["cpu_ms_mean"])
        within = "yes" if all(d <= guard for d in deltas) else "**no**"
        sql = {side: [rows[side][n][name]["queries"] for n in rounds] for side in ("before", "after")}
        digests = {run[name]["digest"] for run in runs}
        same = "-" if digests == {None} else ("yes" if len(digests) == 1 else "**no**")
        if len({run[name]["targets"] for run in runs}) > 1:
            mismatched.append(name)
        lines.append(
            f"| {name} | {SCENARIOS[name]} | "
            + " | ".join(cells)
            + " | "
            + " | ".join(f"{d:+.2f}" for d in deltas)
            + f" | {within} | {_statements(sql['before'])} -> {_statements(sql['after'])} | {same} |"
        )
    if mismatched:
        lines += ["", f"**The two sides did not send the same requests for: {', '.join(mismatched)}.**"]
    return "\n".join(lines) + "\n"


def _machine() -> str:
    model = ""
    with suppress(OSError, StopIteration):
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return f"{os.cpu_count()} CPUs {model}, Python {platform.python_version()}"


def _application() -> Any:
    import django

    django.setup()
    import clinic
    from clinic.wsgi import application

    # The code measured is this tree's (an A/B's `git archive` copy runs its own, not the checkout's).
    assert Path(clinic.__file__).resolve().is_relative_to(ROOT), (clinic.__file__, ROOT)
    return application


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300, help="per scenario (with --ab: per round and side)")
    parser.add_argument("--only", default="", help=f"comma-separated scenarios (default all): {', '.join(SCENARIOS)}")
    parser.add_argument("--json", type=Path, help="also write the results to this file")
    parser.add_argument("--profile", action="store_true", help="also write cProfile text to bench/results/profiles")
    parser.add_argument("--label", default="", help="suffix of the profile files (before, after)")
    parser.add_argument("--ab", nargs=2, type=Path, metavar=("BEFORE_DIR", "AFTER_DIR"), help="interleaved A/B")
    parser.add_argument("--rounds", type=int, default=2, help="--ab: rounds")
    parser.add_argument("--before-label", default="before", help="--ab: the table's name of the before side")
    parser.add_argument("--after-label", default="after", help="--ab: the table's name of the after side")
    parser.add_argument("--heading", default="Request CPU before and after (bench/plans_ab.sh)", help="--ab")
    parser.add_argument("--guard", type=float, default=3.0, help="--ab: CPU ms per request allowed slower")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # one side of --ab
    parser.add_argument("--booking-days", default="0:0", help=argparse.SUPPRESS)  # --serve: offset:window
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else set(SCENARIOS)
    unknown = only - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    if args.serve:
        return serve(args, only)
    if args.ab:
        result = ab(args, *args.ab)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        print(ab_table(result, args), end="")
        return 0

    application = _application()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    loadavg = " ".join(f"{v:.2f}" for v in os.getloadavg())
    fresh = args.requests + WARM_UP + (args.requests if args.profile else 0)
    scenarios = build(application, fresh, only)
    rows = []
    for name, scenario in scenarios.items():
        rows.append(measure(name, scenario, args.requests))
        if args.profile:
            start = args.requests + WARM_UP if name in FRESH else 0
            rest = scenario.calls[start:]
            count = min(len(rest), args.requests) if name in FRESH else args.requests
            profile(f"{name}{'-' + args.label if args.label else ''}", rest, count)
    print("| scenario | requests | CPU ms/request (mean) | CPU ms p50 | wall ms p50 | SQL statements |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['scenario']} | {r['requests']} | {r['cpu_ms_mean']} | {r['cpu_ms_p50']} | {r['wall_ms_p50']} "
            f"| {r['queries']} |"
        )
    if args.json:
        record = {
            "root": str(ROOT),
            "started": started,
            "requests": args.requests,
            "machine": _machine(),
            "loadavg": loadavg,
            "loadavg_end": " ".join(f"{v:.2f}" for v in os.getloadavg()),
            "rows": {r["scenario"]: r for r in rows},
        }
        args.json.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
