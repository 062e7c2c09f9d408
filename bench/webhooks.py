"""Webhook delivery: deliveries per second and the delay from commit to receipt, with a real Celery worker.

    .venv/bin/python bench/webhooks.py [--events 2000] [--rate 20] [--pool threads] [--concurrency 8]

Uses its own database (clinic_bench_webhooks) and a dedicated Celery queue. Each event is published by
event_publish() in its own committed transaction (the path the appointment services take), with an
appointment-sized payload, to one subscription pointing at a local HTTP receiver (a process of its own)
that answers 200 at once; a sample of the deliveries is verified with the standardwebhooks package.

- drain: events published while no worker runs, then one worker starts: deliveries/s of delivery alone;
- paced: events published at --rate per second with the worker running: commit-to-receipt p50/p95/p99;
- burst: events published as fast as one thread commits them, with the worker running.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests
from harness import RESULTS, ROOT, free_port, percentile, prepare


class ReceiverHandler(BaseHTTPRequestHandler):
    """POST: a webhook (its webhook-id and arrival time are kept). GET: everything kept, as JSON."""

    protocol_version = "HTTP/1.1"
    server: Any

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        now = time.time()
        state = self.server.state
        with state["lock"]:
            webhook_id = self.headers["webhook-id"]
            if webhook_id in state["at"]:
                state["duplicates"] += 1
            else:
                state["at"][webhook_id] = now
                if len(state["samples"]) < 50:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    state["samples"].append({"body": body.decode(), "headers": headers})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        with self.server.state["lock"]:
            state = {k: v for k, v in self.server.state.items() if k != "lock"}
            payload = json.dumps(state).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def serve_receiver(port: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), ReceiverHandler)
    server.daemon_threads = True
    server.state = {"lock": threading.Lock(), "at": {}, "duplicates": 0, "samples": []}  # type: ignore[attr-defined]
    server.serve_forever(poll_interval=0.05)


@contextmanager
def receiver() -> Iterator[str]:
    """The receiver runs in a process of its own, so it does not compete with the publisher for the GIL."""
    port = free_port()
    process = multiprocessing.get_context("spawn").Process(target=serve_receiver, args=(port,), daemon=True)
    process.start()
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            requests.get(base, timeout=1)
            break
        except requests.RequestException:
            time.sleep(0.05)
    try:
        yield base
    finally:
        process.terminate()
        process.join(10)


def receipts(base: str) -> dict[str, Any]:
    return dict(requests.get(base, timeout=10).json())


def wait_for(base: str, ids: set[str], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        state = receipts(base)
        if ids <= state["at"].keys():
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(ids - state['at'].keys())} events never arrived")
        time.sleep(0.25)


@contextmanager
def worker(queue: str, pool: str, concurrency: int) -> Iterator[None]:
    command = [sys.executable, "-m", "celery", "-A", "clinic", "worker", "-Q", queue, "-P", pool]
    command += ["-c", str(concurrency), "-l", "WARNING", "--without-mingle", "--without-gossip"]
    process = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ))
    try:
        yield
    finally:
        process.terminate()
        process.wait(30)


def payload(n: int) -> dict[str, Any]:
    return {
        "appointment": {
            "appointment_id": str(uuid.uuid4()),
            "token_number": n % 40 + 1,
            "status": "booked",
            "patient_id": f"PAT-{n:06d}",
            "patient": {"id": str(uuid.uuid4()), "name": "Priya Sharma"},
            "doctor": {"id": str(uuid.uuid4()), "name": "Dr. Ananya Rao", "department": "General Medicine"},
            "branch_id": str(uuid.uuid4()),
            "slot_start": "2026-12-07T09:15:00+05:30",
            "slot_end": "2026-12-07T09:30:00+05:30",
            "visit_type": "consultation",
            "notes": "Fever for three days",
            "created_at": "2026-11-21T10:00:00+05:30",
            "updated_at": "2026-11-21T10:00:00+05:30",
            "checked_in_at": None,
            "completed_at": None,
            "cancelled_at": None,
            "cancellation_reason": None,
            "version": 1,
        }
    }


def publish(count: int, rate: float | None) -> dict[str, float]:
    """Publish `count` events, each in its own transaction; returns event id -> commit time."""
    from django.db import transaction

    from integrations.webhooks.events import event_publish

    committed: dict[str, float] = {}
    started = time.perf_counter()
    for n in range(count):
        if rate:
            pause = started + n / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        box: dict[str, str] = {}

        def stamp(box: dict[str, str] = box) -> None:
            committed[box["id"]] = time.time()

        with transaction.atomic():
            transaction.on_commit(stamp)  # registered first: runs right after COMMIT, before the task is queued
            box["id"] = str(event_publish(event_type="appointment.booked", payload=payload(n)))
    return committed


def summarise(label: str, committed: dict[str, float], state: dict[str, Any], *, drain: bool = False) -> dict[str, Any]:
    arrived = {event_id: state["at"][event_id] for event_id in committed}
    delays = [(arrived[event_id] - at) * 1000 for event_id, at in committed.items()]
    # Drain: queued while no worker ran, so the rate is that of delivery alone (first to last receipt).
    start = min(arrived.values()) if drain else min(committed.values())
    return {
        "run": label,
        "deliveries": len(committed),
        "deliveries_per_s": round(len(committed) / (max(arrived.values()) - start), 1),
        "p50_ms": None if drain else round(percentile(delays, 0.50), 1),
        "p95_ms": None if drain else round(percentile(delays, 0.95), 1),
        "p99_ms": None if drain else round(percentile(delays, 0.99), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2000, help="events in the drain and burst runs")
    parser.add_argument("--paced-events", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=20, help="events per second in the paced run")
    parser.add_argument("--pool", default="threads", choices=["threads", "prefork", "solo"])
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    os.environ["WEBHOOK_ALLOW_PRIVATE_TARGETS"] = "true"  # the receiver is on 127.0.0.1
    os.environ["LOG_LEVEL"] = "WARNING"
    server = prepare(database="clinic_bench_webhooks")
    import django

    django.setup()
    from standardwebhooks import Webhook

    from clinic.celery import app
    from integrations.webhooks.models import WebhookDelivery, WebhookEvent, WebhookSubscription
    from integrations.webhooks.services import subscription_create

    WebhookEvent.objects.all().delete()
    WebhookSubscription.objects.all().delete()
    queue = f"bench.webhooks.{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    rows = []
    with receiver() as base:
        _, secret = subscription_create(name="bench", target_url=f"{base}/hooks", event_types=["appointment.booked"])
        queued = publish(args.events, None)  # no worker yet: the tasks wait in the broker
        with worker(queue, args.pool, args.concurrency):
            rows.append(
                summarise("drain (queued, then one worker)", queued, wait_for(base, set(queued), 600), drain=True)
            )
            runs = ((f"paced {args.rate:g}/s", args.paced_events, args.rate), ("burst", args.events, None))
            for label, count, rate in runs:
                committed = publish(count, rate)
                rows.append(summarise(label, committed, wait_for(base, set(committed), 600)))
            time.sleep(2)
            state = receipts(base)
        for sample in state["samples"]:
            Webhook(secret).verify(sample["body"], sample["headers"])
        failed = WebhookDelivery.objects.exclude(status="succeeded").count()
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).delete(
        queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"
    )
    for row in rows:
        row.update(worker=f"{args.pool} x{args.concurrency}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "webhooks.json").write_text(json.dumps(rows, indent=2))
    lines = ["| run | deliveries | deliveries/s | p50 ms | p95 ms | p99 ms | worker |", "|---|---|---|---|---|---|---|"]
    lines += [
        f"| {r['run']} | {r['deliveries']} | {r['deliveries_per_s']} | {r['p50_ms'] or '-'} | {r['p95_ms'] or '-'} "
        f"| {r['p99_ms'] or '-'} | {r['worker']} |"
        for r in rows
    ]
    (RESULTS / "webhooks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(
        f"duplicates received: {state['duplicates']}; deliveries not succeeded: {failed}; signatures verified: {len(state['samples'])}"
    )
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
