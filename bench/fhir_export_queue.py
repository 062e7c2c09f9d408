"""Webhook delivery latency while FHIR Bulk Data exports run, with real Celery workers on Redis.

    .venv/bin/python bench/fhir_export_queue.py [--exports 10] [--events 300] [--rate 10]
        [--database clinic_bench_fhir_queue]

The database needs patients first (each export writes every Patient), e.g.
`manage.py generate_scale_data --patients 50000 --invoices 0 --doctors 30 --branches 2 --drugs 100` on it.
Events are published as bench/webhooks.py publishes them (event_publish() in a committed transaction, one
subscription, a local receiver in a process of its own), paced at --rate per second, and the delay from
commit to receipt is measured. Workers are `celery worker` processes (prefork, as docker/entrypoint.sh runs
them) on fresh queues of this run. Three runs:

- idle: the `worker` role (default queue, prefork x4) and no export;
- separate queues (this release): the `worker` role and the `export-worker` role (the export queue alone,
  prefork x2); --exports Patient exports queued just before the first event;
- one queue (before): one worker (prefork x4) on the default queue, to which the exports are routed too,
  as before the export queue existed; the same exports.

Writes bench/results/fhir_export_queue.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from harness import RESULTS, ROOT, bench_client, percentile, prepare
from webhooks import publish, receiver, wait_for


@contextmanager
def workers(*specs: tuple[str, list[str], int]) -> Iterator[None]:
    """One `celery worker` process per (name, queues, concurrency), started and answering pings."""
    from clinic.celery import app

    processes = []
    for name, queues, concurrency in specs:
        command = [sys.executable, "-m", "celery", "-A", "clinic", "worker", "-Q", ",".join(queues)]
        command += ["-P", "prefork", "-c", str(concurrency), "-l", "WARNING", "--without-mingle"]
        command += ["--without-gossip", "-n", f"{name}-{uuid.uuid4().hex[:6]}@%h"]
        processes.append(subprocess.Popen(command, cwd=ROOT, env=dict(os.environ)))
    try:
        deadline = time.monotonic() + 60
        while len(app.control.ping(timeout=1.0) or []) < len(specs):
            if time.monotonic() > deadline:
                raise AssertionError("the workers did not start")
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(120)


def kick_off(count: int, client: Any, queue: str) -> list[uuid.UUID]:
    from clinic.celery import task_get
    from integrations.fhir import services

    def enqueue(job_id: uuid.UUID) -> None:
        task_get(services.EXPORT_TASK).apply_async((str(job_id),), queue=queue)

    return [
        services.export_job_create(
            client=client, level="system", types=["Patient"], since=None, request_url="bench", enqueue=enqueue
        ).id
        for _ in range(count)
    ]


def wait_exports(job_ids: list[uuid.UUID], timeout: float) -> None:
    from integrations.fhir.models import ExportJob

    deadline = time.monotonic() + timeout
    while ExportJob.objects.filter(pk__in=job_ids).exclude(status="completed").exists():
        if time.monotonic() > deadline:
            raise AssertionError("exports did not complete")
        time.sleep(0.5)


def run(
    label: str,
    *,
    base: str,
    args: argparse.Namespace,
    exports: bool,
    one_queue: bool,
    client: Any,
    queues: tuple[str, str],
) -> dict[str, Any]:
    """The webhook deliveries go to the first queue (the app's default for this process, set once: Celery
    builds its router on the first send), the exports to the second, or to the first for `one_queue`."""
    from integrations.fhir.models import ExportJob

    default, export_queue = queues
    specs = [("worker", [default], 4)]
    if exports and not one_queue:
        specs.append(("export-worker", [export_queue], 2))
    with workers(*specs):
        started = time.monotonic()
        job_ids = kick_off(args.exports, client, default if one_queue else export_queue) if exports else []
        committed = publish(args.events, args.rate)
        state = wait_for(base, set(committed), 900)
        completed_during = ExportJob.objects.filter(pk__in=job_ids, status="completed").count()
        wait_exports(job_ids, 900)
        exports_seconds = time.monotonic() - started
    delays = [(state["at"][event_id] - at) * 1000 for event_id, at in committed.items()]
    return {
        "run": label,
        "events": len(committed),
        "p50_ms": round(percentile(delays, 0.50), 1),
        "p95_ms": round(percentile(delays, 0.95), 1),
        "p99_ms": round(percentile(delays, 0.99), 1),
        "max_ms": round(max(delays), 1),
        "exports": len(job_ids),
        "exports_completed_while_events_ran": completed_during,
        "seconds_until_every_export_completed": round(exports_seconds, 1) if job_ids else None,
        "workers": " + ".join(f"{name} ({','.join(q)}) prefork x{c}" for name, q, c in specs),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exports", type=int, default=10)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--rate", type=float, default=10, help="events per second")
    parser.add_argument("--database", default="clinic_bench_fhir_queue")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    os.environ["WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"  # the receiver is on 127.0.0.1
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT"] = str(max(args.exports, 2))  # one client starts them all
    os.environ["FHIR_EXPORT_DIR"] = tempfile.mkdtemp(prefix="bench-fhir-export-")
    server = prepare(database=args.database)
    import django

    django.setup()
    from integrations.fhir.models import ExportJob
    from integrations.models import ApiClient
    from integrations.webhooks.models import WebhookEvent, WebhookSubscription
    from integrations.webhooks.services import subscription_create
    from patients.models import Patient

    patients = Patient.objects.count()
    if not patients:
        raise SystemExit("no patients: run generate_scale_data on the database first (see the docstring)")
    WebhookEvent.objects.all().delete()
    WebhookSubscription.objects.all().delete()
    ExportJob.objects.all().delete()
    client = ApiClient.objects.get(client_id=bench_client("patients:read")["client_id"])
    from clinic.celery import app

    queues = (f"bench.default.{uuid.uuid4().hex[:8]}", f"bench.export.{uuid.uuid4().hex[:8]}")
    app.conf.task_default_queue = queues[0]
    rows = []
    with receiver() as base:
        subscription_create(name="bench", target_url=f"{base}/hooks", event_types=["appointment.booked"])
        common = {"base": base, "args": args, "client": client, "queues": queues}
        rows.append(run("idle (no export)", exports=False, one_queue=False, **common))
        rows.append(run("separate queues (this release)", exports=True, one_queue=False, **common))
        rows.append(run("one queue (before)", exports=True, one_queue=True, **common))
    import redis
    from django.conf import settings

    for queue in queues:
        redis.Redis.from_url(settings.REDIS_URL).delete(queue, f"_kombu.binding.{queue}")
    load = os.getloadavg()
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "patients_per_export": patients,
        "rate_per_s": args.rate,
        "cpus": os.cpu_count(),
        "load_average_after": [round(value, 2) for value in load],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fhir_export_queue.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [
        "| run | events | p50 ms | p95 ms | p99 ms | max ms | exports | done while events ran | all exports done (s) | workers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['run']} | {r['events']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['max_ms']} | {r['exports']} "
        f"| {r['exports_completed_while_events_ran']} | {r['seconds_until_every_export_completed'] or '-'} | {r['workers']} |"
        for r in rows
    ]
    print(json.dumps(meta))
    print("\n".join(lines))
    header = f"# Webhook delivery while FHIR exports run (bench/fhir_export_queue.py)\n\n{json.dumps(meta)}\n\n"
    (RESULTS / "fhir_export_queue.md").write_text(header + "\n".join(lines) + "\n")
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
