"""The fault suite (issue 20, docs/operations.md §1): the service deployed as production runs it, broken on
purpose under load, and the right-hand column of issue 20's table asserted.

    .venv/bin/python bench/faults.py [--keep] [--output bench/results/faults.md]

It starts everything itself, on free ports, in a temporary folder (never the shared PostgreSQL or Redis):
a PostgreSQL 15 cluster (initdb, pg_ctl) whose database lives in a tablespace on a small tmpfs (as root) and
a streaming replica of it (pg_basebackup -R) that the web roles read lists from (DATABASE_REPLICA_URL),
PgBouncer in transaction mode with the manifests' settings between the roles and PostgreSQL (issue 35: the
topology production runs), a Redis, the `migrate` role (straight to PostgreSQL), two `web` roles (gunicorn)
behind haproxy, two `worker` roles and `beat` (all through docker/entrypoint.sh with DEBUG off), and a
receiver for webhooks and SMS. Four client threads book appointments (each POST with an Idempotency-Key, retried
with the same key after a balancer error or a 503, as a well-behaved client does) and read lists, search
and details through haproxy while the suite injects, one after another:

    worker SIGKILL, Redis stopped 20 s, PostgreSQL restart (behind PgBouncer), PgBouncer restart, full disk
    (the tablespace's tmpfs filled for 15 s, then freed), web pod SIGKILL, rolling restart (SIGTERM to
    each gunicorn master in turn), webhook receiver down 3 s, beat stopped 20 s

and then asserts: no 500 ever; 503 (with Retry-After) only during the database faults, and a 409
idempotency_key_in_use always with Retry-After; every retried write answered within 10 s of its fault's
end; no webhook or SMS sent twice because a database fault kept its outcome from being recorded; a
balancer error (a request cut) only when a web pod is SIGKILLed or the database path restarts; none at all
during the rolling restart; every role's log line JSON; every booking
exactly once (none lost, none duplicated) and token numbers gap-free; every booked appointment's webhook
and SMS delivered; an audit row for every request the service answered; beat alive again after its
outage; the replica served the lists and holds every booking. It prints a table of figures per fault, writes it to bench/results/faults.md, and exits 1 when an
assertion fails. About 5 minutes on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests
from cryptography.fernet import Fernet
from fault_services import (
    ROOT,
    Haproxy,
    PgBouncer,
    Postgres,
    Receiver,
    Redis,
    Role,
    SmallDisk,
    free_port,
    http_status,
    wait_until,
)

RESULTS = ROOT / "bench" / "results"
BOOKERS = 4
PACE_SECONDS = 0.15  # each client thread's pause between requests: a bounded load, not a benchmark
GIVE_UP_SECONDS = 90  # a booking still unresolved after this is a failure
WRITE_SECONDS = 10  # docs/operations.md §5: every retried write completes within 10 s (of its fault's end)
DISK_FULL_SECONDS = 15
SMALL_DISK_MB = 384


@dataclass
class Sample:
    at: float
    phase: str
    kind: str
    status: int  # 0: no HTTP answer (connection refused or cut)
    from_app: bool  # the service answered (its X-Request-ID is ours), not the balancer
    retry_after: str | None
    seconds: float
    request_id: str
    code: str | None = None  # a 409's problem code


@dataclass
class Booking:
    key: str
    phase: str
    outcome: str = "pending"  # booked | conflict | failed
    appointment_id: str | None = None
    started_at: float = 0.0
    booked_at: float = 0.0
    resolved_at: float = 0.0  # a definite answer: 201 (booked) or 409 conflict
    tries: int = 0
    replayed: bool = False


@dataclass
class Load:
    base: str
    client_id: str
    client_secret: str
    manifest: dict[str, Any]
    phase: str = "warm-up"
    stop: threading.Event = field(default_factory=threading.Event)
    samples: list[Sample] = field(default_factory=list)
    bookings: list[Booking] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    timeline: list[tuple[float, str]] = field(default_factory=list)  # (when, phase) at each change

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.timeline.append((time.monotonic(), phase))

    def phase_at(self, moment: float) -> str:
        current = "warm-up"
        for started, phase in self.timeline:
            if started > moment:
                break
            current = phase
        return current

    def request(self, session: requests.Session, kind: str, method: str, path: str, **kwargs: Any) -> Sample:
        request_id = f"flt-{uuid.uuid4().hex[:20]}"
        headers = {"X-Request-ID": request_id, **kwargs.pop("headers", {})}
        phase, started = self.phase, time.monotonic()
        response: requests.Response | None = None
        with contextlib.suppress(requests.RequestException):
            response = session.request(method, self.base + path, headers=headers, timeout=60, **kwargs)
        sample = Sample(
            at=started,
            phase=phase,
            kind=kind,
            status=response.status_code if response is not None else 0,
            from_app=response is not None and response.headers.get("X-Request-ID") == request_id,
            retry_after=response.headers.get("Retry-After") if response is not None else None,
            seconds=time.monotonic() - started,
            request_id=request_id,
        )
        if response is not None and response.status_code == 409:
            with contextlib.suppress(ValueError, AttributeError):
                sample.code = response.json().get("code")
        sample.response = response  # type: ignore[attr-defined]
        with self.lock:
            self.samples.append(sample)
        return sample

    def session(self) -> requests.Session:
        session = requests.Session()
        for _ in range(60):
            token = session.post(
                f"{self.base}/api/v1/auth/token",
                auth=(self.client_id, self.client_secret),
                data={"grant_type": "client_credentials"},
                timeout=10,
            )
            if token.status_code == 200:
                session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
                return session
            time.sleep(1)
        raise RuntimeError(f"no token: {token.status_code} {token.text[:300]}")

    def book(self, session: requests.Session, body: dict[str, Any]) -> Booking:
        booking = Booking(key=str(uuid.uuid4()), phase=self.phase, started_at=time.monotonic())
        body = body | {"notes": f"faults {booking.key}"}
        deadline = time.monotonic() + GIVE_UP_SECONDS
        while time.monotonic() < deadline:
            booking.tries += 1
            sample = self.request(
                session, "book", "POST", "/api/v1/appointments", json=body, headers={"Idempotency-Key": booking.key}
            )
            response: requests.Response | None = sample.response  # type: ignore[attr-defined]
            if sample.status == 201 and response is not None:
                booking.outcome, booking.appointment_id = "booked", response.json()["appointment_id"]
                booking.booked_at, booking.replayed = time.monotonic(), "Idempotent-Replayed" in response.headers
                booking.resolved_at = booking.booked_at
                break
            code = response.json().get("code") if response is not None and sample.status == 409 else None
            if sample.status == 409 and code != "idempotency_key_in_use":
                booking.outcome = "conflict"  # the slot or the patient's time is taken: a definite answer
                booking.resolved_at = time.monotonic()
                break
            if sample.status in (0, 409, 502, 503, 504):  # retry, same key: executed at most once
                # After Retry-After when given (503, and a 409 idempotency_key_in_use), at most 5 s.
                time.sleep(min(float(sample.retry_after or 0.5), 5.0) if sample.status in (409, 503) else 0.5)
                continue
            self.errors.append(f"booking answered {sample.status}: {response.text[:300] if response else ''}")
            booking.outcome = "failed"
            break
        else:
            booking.outcome = "failed"
            self.errors.append(f"booking {booking.key} unresolved after {GIVE_UP_SECONDS} s")
        with self.lock:
            self.bookings.append(booking)
        return booking

    def booker(self, index: int) -> None:
        """Books one doctor's free slots in order, day after day; reads after each booking."""
        try:
            session = self.session()
            doctors = self.manifest["doctors"]
            doctor = doctors[index % len(doctors)]
            branch = next(b for b in self.manifest["branches"] if b["code"] == doctor["branches"][0])
            patients = [p["patient_id"] for p in self.manifest["patients"]][index::BOOKERS]
            names = [p.get("last_name") or p.get("name", "a") for p in self.manifest["patients"]]
            today = datetime.datetime.now(zoneinfo.ZoneInfo("Asia/Kolkata")).date()
            count = 0
            for days in range(2 + index * 40, 400):
                day = (today + datetime.timedelta(days=days)).isoformat()
                params = {"doctor_id": doctor["id"], "branch_id": branch["id"], "date": day}
                slots = self.request(session, "slots", "GET", "/api/v1/appointments/slots", params=params)
                while slots.status != 200 and not self.stop.is_set():
                    time.sleep(0.5)
                    slots = self.request(session, "slots", "GET", "/api/v1/appointments/slots", params=params)
                for slot in slots.response.json() if slots.status == 200 else []:  # type: ignore[attr-defined]
                    if self.stop.is_set():
                        return
                    count += 1
                    booking = self.book(
                        session,
                        {
                            "patient_id": patients[count % len(patients)],
                            "doctor_id": doctor["id"],
                            "branch_id": branch["id"],
                            "slot_start": slot["start_time"],
                            "slot_end": slot["end_time"],
                        },
                    )
                    if booking.appointment_id:
                        self.request(session, "detail", "GET", f"/api/v1/appointments/{booking.appointment_id}")
                    self.request(session, "list", "GET", "/api/v1/appointments", params={"doctor_id": doctor["id"]})
                    self.request(session, "search", "GET", "/api/v1/patients", params={"search": names[count % 20]})
                    time.sleep(PACE_SECONDS)
        except Exception as exc:  # noqa: BLE001 - reported as a failure of the run
            self.errors.append(f"client thread {index}: {type(exc).__name__}: {exc}")


class Deployment:
    """Everything the suite starts, in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.postgres = Postgres(folder, free_port(55440, 55499))
        # The roles reach PostgreSQL through PgBouncer in transaction mode with the manifests' settings
        # (deploy/kubernetes/base/pgbouncer.yaml), as production does; migrate and the suite's own
        # commands and checks go straight to PostgreSQL (database-url-direct).
        self.pgbouncer = PgBouncer(folder, free_port(56700, 56799), self.postgres.port)
        # The database's tables on a small tmpfs, for the full-disk fault (root only: mount).
        self.disk = SmallDisk(folder, SMALL_DISK_MB) if SmallDisk.available() else None
        # The web pods read lists and searches from a streaming replica (DATABASE_REPLICA_URL, clinic/replica.py).
        self.replica = Postgres(folder, free_port(self.postgres.port + 1, 55499), name="replica")
        self.redis = Redis(folder, free_port(56380, 56399))
        self.receiver = Receiver(free_port(56400, 56499))
        self.env = self._environment()
        self.web_ports = {"web1": free_port(56500, 56599), "web2": 0}
        self.web_ports["web2"] = free_port(self.web_ports["web1"] + 1, 56599)
        self.roles: dict[str, Role] = {}
        for name, port in self.web_ports.items():
            env = self.env | {
                "GUNICORN_BIND": f"127.0.0.1:{port}",
                "PROMETHEUS_MULTIPROC_DIR": str(folder / name),
                "DATABASE_REPLICA_URL": self.replica.url,
            }
            self.roles[name] = Role(name, "web", env, folder)
        for name in ("worker1", "worker2"):
            self.roles[name] = Role(name, "worker", self.env, folder)
        self.roles["beat"] = Role("beat", "beat", self.env, folder)
        self.haproxy = Haproxy(folder, free_port(56600, 56699), self.web_ports)
        self.base = f"http://127.0.0.1:{self.haproxy.port}"

    def _environment(self) -> dict[str, str]:
        venv_bin = str(Path(sys.executable).parent)
        return {
            **{k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "USER")},
            "PATH": f"{venv_bin}:{os.environ['PATH']}",
            "ENV_FILE": "/dev/null",  # the checkout's .env (DEBUG on, development keys) stays out
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "FIELD_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "DATABASE_URL": self.pgbouncer.url("clinic"),
            "DATABASE_TRANSACTION_POOLING": "true",
            "REDIS_URL": self.redis.url,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SECURE_COOKIES": "false",
            "TRUSTED_PROXIES": "127.0.0.1",
            "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",  # the receiver listens on 127.0.0.1
            "SMS_BACKEND": "http",
            "SMS_GATEWAY_URL": f"http://127.0.0.1:{self.receiver.port}/sms",
            "GUNICORN_WORKERS": "2",
            "GUNICORN_THREADS": "2",
            "GUNICORN_DRAIN_SECONDS": "4",  # haproxy marks a draining pod down after 2 failed checks (2 s)
            "CELERY_CONCURRENCY": "2",
            "LOG_LEVEL": "WARNING",
            "ROLE_HEARTBEAT_SECONDS": "5",
            # Bounds of the recovery after a killed worker, shortened from production's 60 s and 120 s so
            # that the run takes minutes; the mechanism is the same.
            "WEBHOOK_TIMEOUT_SECONDS": "5",
            "WEBHOOK_CLAIM_LEASE_SECONDS": "15",
            "NOTIFICATION_CLAIM_LEASE_SECONDS": "40",
            "IDEMPOTENCY_STALE_AFTER_SECONDS": "15",
            "PYTHONDONTWRITEBYTECODE": "1",
            # Celery's warning about running as root (CI runs as root; the image as uid 10001) is not a log line.
            **(
                {"PYTHONWARNINGS": "ignore:You're running the worker with superuser privileges"}
                if os.geteuid() == 0
                else {}
            ),
        }

    @property
    def direct_env(self) -> dict[str, str]:
        """The migrate role's and the suite's own commands': straight to PostgreSQL."""
        return self.env | {"DATABASE_URL": self.postgres.url, "DATABASE_TRANSACTION_POOLING": "false"}

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.direct_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)}: {result.stderr[-2000:]}")
        return result.stdout

    def up(self) -> dict[str, Any]:
        if self.disk is not None:
            self.disk.create()
        self.postgres.init(tablespace=self.disk.data if self.disk is not None else None)
        self.pgbouncer.start()
        self.redis.start()
        self.receiver.start()
        subprocess.run(
            [str(ROOT / "docker" / "entrypoint.sh"), "migrate"],
            cwd=ROOT,
            env=self.direct_env,
            check=True,
            capture_output=True,
        )
        manifest = json.loads(self.manage("seed_demo", "--json"))
        client = json.loads(
            self.manage(
                *("create_api_client", "--name", "faults", "--rate-limit", "100000", "--json"),
                *("--scopes", "appointments:read appointments:write patients:read"),
            )
        )
        subscription = json.loads(
            self.manage(
                *("create_webhook_subscription", "--name", "faults", "--events", "appointment.booked", "--json"),
                *("--url", f"http://127.0.0.1:{self.receiver.port}/hooks"),
            )
        )
        self.receiver.secret = subscription["signing_secret"]
        self.replica.init_standby(self.postgres)
        self.manage(
            "shell",
            "-c",
            "from integrations.models import NotificationSettings as S; s = S.load(); s.sms_enabled = True; s.save()",
        )
        for role in self.roles.values():
            role.start()
        self.haproxy.start()
        for name in self.web_ports:
            self.wait_ready(name, 90)
        wait_until("worker and beat liveness", lambda: self.liveness("worker") and self.liveness("beat"), 90)
        wait_until("haproxy", lambda: http_status(self.base + "/readyz") == 200, 30)
        return {"manifest": manifest, "client": client}

    def wait_ready(self, name: str, timeout: float) -> float:
        port = self.web_ports[name]
        return wait_until(f"{name} /readyz", lambda: http_status(f"http://127.0.0.1:{port}/readyz") == 200, timeout)

    def liveness(self, role: str) -> bool:
        result = subprocess.run(
            [sys.executable, "manage.py", "liveness", role, "--any"], cwd=ROOT, env=self.env, capture_output=True
        )
        return result.returncode == 0

    def down(self) -> None:
        self.haproxy.stop()
        for role in self.roles.values():
            if role.alive():
                role.kill()
        self.receiver.stop()
        self.redis.stop()
        self.pgbouncer.stop()
        self.replica.stop()
        self.postgres.stop()
        if self.disk is not None:
            self.disk.remove()


# --- The faults: each returns its own figures ------------------------------------------------------------


def worker_kill(d: Deployment) -> dict[str, Any]:
    d.roles["worker1"].kill()
    time.sleep(5)
    d.roles["worker1"].start()
    return {"note": "worker1 SIGKILLed, restarted after 5 s"}


def redis_outage(d: Deployment) -> dict[str, Any]:
    d.redis.stop()
    time.sleep(20)
    d.redis.start()
    return {"note": "Redis stopped 20 s (its data lost), then started"}


def postgres_restart(d: Deployment) -> dict[str, Any]:
    started = time.monotonic()
    d.postgres.restart()
    restart = time.monotonic() - started
    cleared = time.monotonic()
    ready = d.wait_ready("web1", 60)
    return {
        "note": f"pg_ctl restart -m fast behind PgBouncer took {restart:.1f} s; web1 ready {ready:.1f} s later",
        "cleared": cleared,
    }


def pgbouncer_restart(d: Deployment) -> dict[str, Any]:
    d.pgbouncer.stop()  # SIGTERM: every client and server connection closed at once, transactions cut
    time.sleep(1)
    d.pgbouncer.start()
    cleared = time.monotonic()
    ready = d.wait_ready("web1", 60)
    return {
        "note": f"PgBouncer stopped (SIGTERM), started 1 s later; web1 ready {ready:.1f} s later",
        "cleared": cleared,
    }


def disk_full(d: Deployment) -> dict[str, Any]:
    if d.disk is None:
        return {"note": "skipped: not root (the small disk is a tmpfs mount)", "cleared": time.monotonic()}
    written = d.disk.fill()
    time.sleep(DISK_FULL_SECONDS)
    d.disk.free()
    cleared = time.monotonic()
    return {
        "note": f"the tablespace's {SMALL_DISK_MB} MB tmpfs filled ({written >> 20} MB written) for "
        f"{DISK_FULL_SECONDS} s under load, then freed",
        "cleared": cleared,
    }


def web_kill(d: Deployment) -> dict[str, Any]:
    d.roles["web1"].kill()
    time.sleep(3)
    d.roles["web1"].start()
    ready = d.wait_ready("web1", 90)
    time.sleep(3)  # haproxy's rise 2 x inter 1 s
    return {"note": f"web1 (master and workers) SIGKILLed; restarted 3 s later, ready after {ready:.1f} s"}


def rolling_restart(d: Deployment) -> dict[str, Any]:
    stops = []
    for name in d.web_ports:
        stops.append(d.roles[name].terminate())
        d.roles[name].start()
        d.wait_ready(name, 90)
        time.sleep(3)  # back in haproxy's rotation before the next one goes
    return {"note": "SIGTERM to each gunicorn master in turn: " + ", ".join(f"stopped in {s:.1f} s" for s in stops)}


def receiver_outage(d: Deployment) -> dict[str, Any]:
    d.receiver.stop()
    time.sleep(3)
    d.receiver.start()
    return {"note": "receiver refused connections for 3 s (the first retry comes 4-6 s after a failure)"}


def beat_outage(d: Deployment) -> dict[str, Any]:
    d.roles["beat"].terminate()
    time.sleep(20)
    d.roles["beat"].start()
    alive = wait_until("beat liveness after restart", lambda: d.liveness("beat"), 60, interval=1)
    return {"note": f"beat stopped 20 s; alive (liveness) {alive:.1f} s after start"}


FAULTS: list[tuple[str, Callable[[Deployment], dict[str, Any]]]] = [
    ("worker SIGKILL", worker_kill),
    ("Redis down 20 s", redis_outage),
    ("PostgreSQL restart", postgres_restart),
    ("PgBouncer restart", pgbouncer_restart),
    ("full disk", disk_full),
    ("web pod SIGKILL", web_kill),
    ("rolling restart", rolling_restart),
    ("receiver down 3 s", receiver_outage),
    ("beat down 20 s", beat_outage),
]
STEADY_SECONDS = 4


SUPERVISED = ("worker1", "worker2", "beat")
# The faults during which the service may answer 503 (with Retry-After) and haproxy may take pods out.
DATABASE_FAULTS = ("PostgreSQL restart", "PgBouncer restart", "full disk")


def supervise(d: Deployment, stop: threading.Event, restarts: list[str]) -> None:
    """What the orchestrator's restart policy does in production (compose `restart: unless-stopped`, a
    Deployment's pods): a worker or beat that exits on its own is started again, and the report counts it.
    Celery 5.7 with kombu's Redis transport can exit when the broker connection is lost while it closes its
    channel ("Unrecoverable error: AttributeError ... 'hostname'", an upstream race): without a restart
    policy, its queued deliveries and the beat-run audit flush would wait forever."""
    while not stop.wait(1):
        for name in SUPERVISED:
            if d.roles[name].restart_if_exited():
                restarts.append(name)
                print(f"[faults] {name} had exited on its own; restarted (restart policy)", flush=True)


def run_faults(d: Deployment, load: Load) -> dict[str, dict[str, Any]]:
    figures: dict[str, dict[str, Any]] = {}
    time.sleep(STEADY_SECONDS + 2)
    for name, fault in FAULTS:
        print(f"[faults] {name}", flush=True)
        load.enter(name)
        started = time.monotonic()
        result = fault(d)
        figures[name] = (
            {"cleared": time.monotonic()} | result | {"seconds": time.monotonic() - started, "started": started}
        )
        time.sleep(STEADY_SECONDS)  # the aftermath belongs to the fault
        load.enter("steady")
        time.sleep(2)
    return figures


# --- Checks ------------------------------------------------------------------------------------------------


def database_state(d: Deployment, load: Load) -> dict[str, Any]:
    with psycopg.connect(d.postgres.url) as connection:
        rows = connection.execute(
            "SELECT notes, id::text FROM appointments_appointment WHERE notes LIKE 'faults %'"
        ).fetchall()
        # The days the load booked (the demo data's own days hold cancelled and reset numbers on purpose).
        tokens = connection.execute(
            "SELECT doctor_id, local_date, array_agg(token_number ORDER BY token_number) "
            "FROM appointments_appointment GROUP BY doctor_id, local_date "
            "HAVING bool_or(notes LIKE 'faults %')"
        ).fetchall()
        request_ids = [s.request_id for s in load.samples if s.from_app]
        audited = {
            r[0]
            for r in connection.execute(
                "SELECT request_id FROM integrations_auditlogentry WHERE request_id = ANY(%s)", [request_ids]
            )
        }
        notified = {
            r[0]: r[1]
            for r in connection.execute(
                "SELECT subject_id::text, status FROM integrations_notificationattempt "
                "WHERE event_type = 'appointment.booked' AND channel = 'sms' AND status IN ('sent', 'skipped')"
            )
        }
    with psycopg.connect(d.replica.url) as connection:
        replica = connection.execute(
            "SELECT pg_is_in_recovery(), xact_commit + xact_rollback, tup_returned, "
            "(SELECT count(*) FROM appointments_appointment WHERE notes LIKE 'faults %') "
            "FROM pg_stat_database WHERE datname = 'clinic'"
        ).fetchone()
    by_key: dict[str, list[str]] = {}
    for notes, appointment_id in rows:
        by_key.setdefault(notes.removeprefix("faults "), []).append(appointment_id)
    gaps = [
        (str(doc), str(day), numbers) for doc, day, numbers in tokens if numbers != list(range(1, len(numbers) + 1))
    ]
    return {
        "token days": len(tokens),
        "replica": replica,
        "by_key": by_key,
        "gaps": gaps,
        "unaudited": set(request_ids) - audited,
        "notified": notified,
    }


def settle(d: Deployment, load: Load, timeout: float) -> tuple[dict[str, Any], float]:
    """Waits for the deliveries, notifications and deferred audit rows; returns the last state seen."""
    booked = {b.appointment_id for b in load.bookings if b.appointment_id}
    started = time.monotonic()
    while True:
        state = database_state(d, load)
        with d.receiver.lock:
            hooked = {w["appointment_id"] for w in d.receiver.webhooks if w["valid"]}
        done = booked <= hooked and booked <= set(state["notified"]) and not state["unaudited"]
        if done or time.monotonic() - started > timeout:
            return state, time.monotonic() - started
        time.sleep(2)


def phase_figures(
    load: Load, receiver: Receiver, name: str, started: float | None = None, cleared_at: float | None = None
) -> dict[str, Any]:
    samples = [s for s in load.samples if s.phase == name]
    bad = [s for s in samples if not 200 <= s.status < 300 and s.status != 409]
    first_hook: dict[str, float] = {}
    for w in receiver.webhooks:
        if w["valid"] and w["appointment_id"] not in first_hook:
            first_hook[w["appointment_id"]] = w["at"]
    delays = [
        first_hook[b.appointment_id] - b.booked_at
        for b in load.bookings
        if b.phase == name and b.appointment_id in first_hook
    ]
    # Service back: the first 2xx answer to a request sent after the last failed one, from the fault's start.
    last_bad = max((s.at for s in bad), default=None)
    back = min(
        (s.at + s.seconds for s in samples if 200 <= s.status < 300 and last_bad and s.at > last_bad), default=None
    )
    bookings = [b for b in load.bookings if b.phase == name and b.resolved_at]
    cleared = max(started or 0.0, cleared_at or 0.0)
    with receiver.lock:
        webhooks = [w for w in receiver.webhooks if w["valid"]]
        sms = list(receiver.sms)
    # A send repeated (the same webhook id, the same SMS to the same number) counts against the phase of its
    # first send: that is when its outcome failed to be recorded; the repeat comes a claim lease later.
    first_by_id: dict[str, float] = {}
    dup_hooks = 0
    for w in webhooks:
        first = first_by_id.setdefault(w["webhook_id"], w["at"])
        if first != w["at"] and load.phase_at(first) == name:
            dup_hooks += 1
    first_sms: dict[tuple[str, str], float] = {}
    dup_sms = 0
    for m in sms:
        first = first_sms.setdefault((m.get("to", ""), m.get("message", "")), m["at"])
        if first != m["at"] and load.phase_at(first) == name:
            dup_sms += 1
    return {
        "requests": len(samples),
        "back after s": (back - started) if back is not None and started is not None else 0.0,
        "ok": sum(1 for s in samples if 200 <= s.status < 300),
        "500": sum(1 for s in samples if s.status == 500),
        "app 503": sum(1 for s in samples if s.status == 503 and s.from_app),
        "503 without Retry-After": sum(1 for s in samples if s.status == 503 and not s.retry_after),
        "409 in use": sum(1 for s in samples if s.status == 409 and s.code == "idempotency_key_in_use"),
        "409 in use without Retry-After": sum(
            1 for s in samples if s.status == 409 and s.code == "idempotency_key_in_use" and not s.retry_after
        ),
        "balancer 5xx": sum(1 for s in samples if s.status >= 500 and not s.from_app),
        "aborted": sum(1 for s in samples if s.status == 0),
        "unavailable s": (max(s.at + s.seconds for s in bad) - min(s.at for s in bad)) if bad else 0.0,
        "max latency s": max((s.seconds for s in samples), default=0.0),
        "bookings": sum(1 for b in load.bookings if b.phase == name and b.outcome == "booked"),
        "retried": sum(1 for b in load.bookings if b.phase == name and b.tries > 1),
        "max webhook delay s": max(delays, default=0.0),
        # From a booking's first try to its definite answer (201 or conflict)...
        "max write s": max((b.resolved_at - b.started_at for b in bookings), default=0.0),
        # ...and from the later of its first try and the fault's end (PostgreSQL, PgBouncer, disk back).
        "write after fault s": max((b.resolved_at - max(b.started_at, cleared) for b in bookings), default=0.0),
        "dup webhooks": dup_hooks,
        "dup SMS": dup_sms,
    }


def non_json_lines(folder: Path) -> dict[str, int]:
    """Lines of the roles' output that are not one JSON object (docs/operations.md §10: every line, DEBUG off)."""
    counts: dict[str, int] = {}
    for log in sorted(folder.glob("*.log")):
        if log.stem in ("redis", "haproxy"):
            continue
        bad = 0
        for line in log.read_text(errors="replace").splitlines():
            try:
                bad += not isinstance(json.loads(line), dict)
            except ValueError:
                bad += 1
        if bad:
            counts[log.stem] = bad
    return counts


def check(load: Load, state: dict[str, Any], receiver: Receiver, figures: dict[str, dict[str, Any]]) -> list[str]:
    failures = list(load.errors)
    for name, row in figures.items():
        if row["500"]:
            failures.append(f"{name}: {row['500']} responses 500")
        if row["503 without Retry-After"]:
            failures.append(f"{name}: {row['503 without Retry-After']} 503 without Retry-After")
        if row["app 503"] and name not in DATABASE_FAULTS:
            failures.append(f"{name}: {row['app 503']} 503 from the service outside a PostgreSQL outage")
        if row["balancer 5xx"] and name not in ("web pod SIGKILL", *DATABASE_FAULTS):
            failures.append(f"{name}: {row['balancer 5xx']} balancer errors")
        if row["aborted"] and name not in ("web pod SIGKILL", "PostgreSQL restart", "PgBouncer restart"):
            failures.append(f"{name}: {row['aborted']} aborted requests")
        if row["409 in use without Retry-After"]:
            failures.append(
                f"{name}: {row['409 in use without Retry-After']} 409 idempotency_key_in_use without Retry-After"
            )
        if row["write after fault s"] > WRITE_SECONDS:
            failures.append(
                f"{name}: a write took {row['write after fault s']:.1f} s after the fault's end to complete "
                f"(more than {WRITE_SECONDS} s; {row['max write s']:.1f} s from its first try)"
            )
        if name in DATABASE_FAULTS and (row["dup webhooks"] or row["dup SMS"]):
            failures.append(
                f"{name}: {row['dup webhooks']} webhooks and {row['dup SMS']} SMS sent again (their outcome "
                "could not be recorded)"
            )
    booked = {b.key: b.appointment_id for b in load.bookings if b.outcome == "booked"}
    for key, ids in state["by_key"].items():
        if len(ids) > 1:
            failures.append(f"booking {key} stored {len(ids)} times")
        if key not in booked:
            failures.append(f"booking {key} stored ({ids}) though the client never got its 201")
    lost = [key for key, appointment_id in booked.items() if state["by_key"].get(key) != [appointment_id]]
    if lost:
        failures.append(f"{len(lost)} bookings answered 201 but not stored as answered: {lost[:5]}")
    if state["gaps"]:
        failures.append(f"token numbers with gaps: {state['gaps'][:3]}")
    if state["unaudited"]:
        failures.append(
            f"{len(state['unaudited'])} answered requests without an audit row: {sorted(state['unaudited'])[:5]}"
        )
    hooked = {w["appointment_id"] for w in receiver.webhooks if w["valid"]}
    missing = set(booked.values()) - hooked
    if missing:
        failures.append(f"{len(missing)} booked appointments without a delivered webhook")
    unnotified = set(booked.values()) - set(state["notified"])
    if unnotified:
        failures.append(f"{len(unnotified)} booked appointments without an SMS sent")
    if any(not w["valid"] for w in receiver.webhooks):
        failures.append("a webhook with an invalid signature arrived")
    in_recovery, transactions, _, replicated = state["replica"]
    lists = sum(1 for s in load.samples if s.kind in ("list", "search") and 200 <= s.status < 300)
    if not in_recovery or transactions < lists:
        failures.append(f"the replica (standby: {in_recovery}) ran {transactions} transactions for {lists} lists")
    if replicated != len(booked):
        failures.append(f"the replica holds {replicated} of the {len(booked)} bookings after the run")
    if len(booked) < 50:
        failures.append(f"only {len(booked)} bookings: the load did not run")
    return failures


COLUMNS = ["requests", "ok", "500", "app 503", "balancer 5xx", "aborted", "409 in use", "unavailable s"]
COLUMNS += ["back after s", "max latency s"]
COLUMNS += ["bookings", "retried", "max write s", "write after fault s", "max webhook delay s"]
COLUMNS += ["dup webhooks", "dup SMS"]


def report(figures: dict[str, dict[str, Any]], totals: dict[str, Any], failures: list[str]) -> str:
    def cell(value: Any) -> str:
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    lines = [
        "# Fault suite (`bench/faults.py`)",
        "",
        f"Run {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores (shared): two gunicorn",
        "pods (2 workers x 2 threads) behind haproxy, two Celery workers (concurrency 2), beat, a private PostgreSQL 15 with a streaming replica",
        f"and Redis; {BOOKERS} client threads booking with Idempotency-Key and reading lists, search and details.",
        "Every role reaches PostgreSQL through PgBouncer (transaction mode, deploy/kubernetes/base/pgbouncer.yaml's",
        "settings); the database's tables live in a tablespace on a small tmpfs (the full-disk fault).",
        "Each row: the fault and the 4 s after it. `unavailable s`: first to last non-2xx/409 answer; `back after s`:",
        "from the fault to the first 2xx after the last failure (clients wait out Retry-After: 5 s);",
        "`409 in use`: retries refused with idempotency_key_in_use; `max write s`: a booking's first try to its",
        "definite answer (201 or conflict); `write after fault s`: the same from the fault's end (PostgreSQL, PgBouncer",
        "or the disk back) when later; `max webhook delay s`: booking's 201 to the receiver's first valid delivery,",
        "for bookings made then; `dup webhooks`/`dup SMS`: sends repeated, counted in the phase of the first send.",
        "",
        "| fault | " + " | ".join(COLUMNS) + " | what was done |",
        "|---|" + "---|" * (len(COLUMNS) + 1),
    ]
    for name, row in figures.items():
        lines.append(f"| {name} | " + " | ".join(cell(row[c]) for c in COLUMNS) + f" | {row['note']} |")
    lines += ["", "Totals: " + ", ".join(f"{k} {cell(v)}" for k, v in totals.items()), ""]
    lines += ["Result: " + ("PASSED" if not failures else "FAILED"), *[f"- {f}" for f in failures], ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder (logs) afterwards.")
    parser.add_argument("--output", type=Path, default=RESULTS / "faults.md")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a CI timeout still stops everything started
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="clinic-faults-"))
    deployment = Deployment(folder)
    try:
        setup = deployment.up()
        print(
            f"[faults] up in {time.monotonic() - started:.0f} s ({folder}); load through {deployment.base}", flush=True
        )
        client = setup["client"]
        load = Load(deployment.base, client["client_id"], client["client_secret"], setup["manifest"])
        threads = [threading.Thread(target=load.booker, args=(i,), daemon=True) for i in range(BOOKERS)]
        for thread in threads:
            thread.start()
        restarts: list[str] = []
        supervisor_stop = threading.Event()
        supervisor = threading.Thread(target=supervise, args=(deployment, supervisor_stop, restarts), daemon=True)
        supervisor.start()
        figures = run_faults(deployment, load)
        load.stop.set()
        for thread in threads:
            thread.join(GIVE_UP_SECONDS + 10)
        state, waited = settle(deployment, load, timeout=150)
        supervisor_stop.set()
        supervisor.join(5)
        rows = {
            name: phase_figures(load, deployment.receiver, name, figures[name]["started"], figures[name]["cleared"])
            | figures[name]
            for name in figures
        }
        booked = [b for b in load.bookings if b.outcome == "booked"]
        totals = {
            "requests": len(load.samples),
            "bookings": len(booked),
            "doctor-days checked gap-free": state["token days"],
            "conflicts": sum(1 for b in load.bookings if b.outcome == "conflict"),
            "replayed 201s": sum(1 for b in booked if b.replayed),
            "replica transactions": state["replica"][1],
            "lists and searches answered": sum(
                1 for s in load.samples if s.kind in ("list", "search") and s.status == 200
            ),
            "webhook receipts": len(deployment.receiver.webhooks),
            "SMS received": len(deployment.receiver.sms),
            "settled after load s": waited,
            "roles restarted by the restart policy": ", ".join(restarts) or "none",
            "run s": time.monotonic() - started,
        }
        failures = check(load, state, deployment.receiver, rows)
        not_json = non_json_lines(folder)
        totals["role log lines not JSON"] = sum(not_json.values())
        failures += [f"{role}: {count} log lines that are not JSON (DEBUG off)" for role, count in not_json.items()]
        text = report(rows, totals, failures)
        print(text)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        return 1 if failures else 0
    finally:
        deployment.down()
        if args.keep:
            print(f"[faults] logs kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
