"""Shared benchmark plumbing: a prepared database, a benchmark API client, gunicorn as production runs
it, and latency measurement at concurrency 1 over one keep-alive connection."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT))

from clinic.launch import manage, prepare_environment  # noqa: E402


def prepare(database: str | None = None) -> Any:
    """Environment as `make run` (DATABASE_URL or embedded PostgreSQL, Redis), optionally another DB name."""
    server = prepare_environment(redis_default="redis://127.0.0.1:6379/0", embedded_redis=False)
    if database:
        import psycopg

        # Swap the database name in the URL's path; the query may hold a socket directory (embedded server).
        parts = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
        with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
                conn.execute(f'CREATE DATABASE "{database}"')
        os.environ["DATABASE_URL"] = parts._replace(path=f"/{database}").geturl()
    manage("migrate", "--no-input", "-v", "0")
    return server


def bench_client(scopes: str) -> dict[str, Any]:
    return json.loads(
        manage(
            "create_api_client",
            "--name",
            f"bench-{time.time_ns()}",
            "--scopes",
            scopes,
            "--rate-limit",
            "100000",
            "--json",
            capture=True,
        )
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def gunicorn(workers: int = 2, threads: int = 1) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "clinic.wsgi:application",
            "--config",
            "python:clinic.gunicorn_config",  # as docker/entrypoint.sh runs the web role
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                requests.get(f"{base}/healthz", timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(10)


def token(session: requests.Session, base: str, client: dict[str, Any]) -> str:
    response = session.post(
        f"{base}/api/v1/auth/token",
        data={"grant_type": "client_credentials"},
        auth=(client["client_id"], client["client_secret"]),
    )
    response.raise_for_status()
    return str(response.json()["access_token"])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(round(q * (len(ordered) - 1)), len(ordered) - 1)]


def measure(label: str, calls: list[Callable[[], Any]] | Callable[[], Any], count: int) -> dict[str, Any]:
    """Run `count` calls (cycling through a list of calls), after a warm-up, and summarise latencies."""
    pool = calls if isinstance(calls, list) else [calls]
    for i in range(min(50, count)):
        pool[i % len(pool)]()
    samples = []
    for i in range(count):
        started = time.perf_counter()
        pool[i % len(pool)]()
        samples.append((time.perf_counter() - started) * 1000)
    return {
        "endpoint": label,
        "requests": count,
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(percentile(samples, 0.95), 2),
        "p99_ms": round(percentile(samples, 0.99), 2),
        "throughput_rps": round(count / (sum(samples) / 1000), 1),
    }


def write(name: str, rows: list[dict[str, Any]]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=2))
    lines = ["| endpoint | requests | p50 ms | p95 ms | p99 ms | req/s |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r['endpoint']} | {r['requests']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['throughput_rps']} |"
        for r in rows
    ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


class OruWorld:
    """A branch with a 10-analyte panel (a reference range each), a doctor, an adult patient and a registered
    HL7 sender for the branch: what bench/hl7.py and bench/hl7_cpu.py send ORU^R01 results about."""

    def __init__(self, sender_name: str) -> None:
        from datetime import timedelta
        from decimal import Decimal

        from django.utils import timezone

        from integrations.hl7.models import Hl7Sender
        from lab.models import RangeSex, ReferenceRange
        from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
        from tests.lab.order_factories import AnalyteFactory, LabTestFactory
        from tests.patients.factories import PatientFactory

        self.code = code = f"B{time.time_ns() % 10**8}"
        branch: Any = BranchFactory(code=code[:6], time_zone="Asia/Kolkata")
        self.branch = branch
        self.panel: Any = LabTestFactory(code=f"P{code}", name="Bench panel")
        for n in range(10):
            analyte: Any = AnalyteFactory(test=self.panel, code=f"AN{n}", unit="g/dL", position=n)
            ReferenceRange.objects.create(
                analyte=analyte, sex=RangeSex.ANY, age_min_days=0, low=Decimal(10), high=Decimal(20)
            )
        self.doctor: Any = DoctorFactory(department=DepartmentFactory())
        self.doctor.branches.add(self.branch)
        self.patient: Any = PatientFactory(
            patient_id=f"BENCH-{code}",
            registration_branch=self.branch,
            date_of_birth=timezone.localdate() - timedelta(days=40 * 365),
        )
        sender, _ = Hl7Sender.objects.get_or_create(name=sender_name, defaults={"networks": ["127.0.0.1/32"]})
        sender.branches.add(branch)  # a sender reports only on its branches' orders
        self.now = timezone.now().strftime("%Y%m%d%H%M%S+0000")

    def collected_accession(self) -> str:
        """A new order of the panel, collected: its item's accession number."""
        from lab import services
        from lab.models import Priority

        order = services.lab_order_create(
            branch=self.branch,
            patient=self.patient,
            doctor=self.doctor,
            tests=[self.panel],
            priority=Priority.ROUTINE,
            ordered_by="bench",
        )
        services.lab_order_collect(order=order)
        return str(order.items.get().accession_number)

    def oru(self, n: int, accession: str) -> str:
        """ORU^R01 number `n` with 10 final NM results for the order of `accession`."""
        lines = [
            f"MSH|^~\\&|BENCH|LAB|CLINIC|{self.code}|{self.now}||ORU^R01^ORU_R01|{self.code}-{n}|P|2.5.1",
            f"PID|1||{self.patient.patient_id}",
            f"ORC|RE|{accession}",
            f"OBR|1|{accession}||{self.panel.code}|||{self.now}",
        ] + [f"OBX|{i + 1}|NM|AN{i}||{12 + i % 5}.{n % 10}|g/dL|||||F|||{self.now}||^Bench^B" for i in range(10)]
        return "\r".join(lines) + "\r"
