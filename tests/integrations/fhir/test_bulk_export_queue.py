"""Bulk Data exports run on a Celery queue of their own (FHIR_EXPORT_QUEUE), so a webhook delivery never
waits behind one: with a real worker consuming the default queue only, a queued export stays on its queue in
Redis while a booking's webhook is delivered. The roles that run workers consume what docs/operations.md §1
says: `worker` the default queue, `export-worker` the export queue, the dev launcher both."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from clinic import heartbeat
from clinic.celery import app, task_get
from integrations.fhir import services
from integrations.fhir.models import ExportJob
from integrations.webhooks.models import WebhookDelivery
from tests.appointments.test_booking import DAY, at, book, booking, branch, doctor, patient, writer
from tests.integrations.webhook_receiver import receiver, subscribe
from tests.worker import ROOT, celery_worker

__all__ = ["branch", "celery_worker", "doctor", "patient", "receiver", "writer"]
QUEUE = "fhir-export"


@pytest.fixture
def broker() -> Any:
    connection = redis.Redis.from_url(settings.REDIS_URL)
    connection.delete(QUEUE)
    yield connection
    connection.delete(QUEUE)


def _export_messages(broker: Any) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in broker.lrange(QUEUE, 0, -1)]


def test_the_export_queue_is_a_setting_of_its_own_and_the_tasks_are_routed_to_it() -> None:
    assert settings.FHIR_EXPORT_QUEUE == QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE == "celery"
    route = app.amqp.router.route
    assert route({}, services.EXPORT_TASK)["queue"].name == QUEUE
    assert route({}, "integrations.tasks.fhir_exports_expire")["queue"].name == QUEUE  # the files are there
    assert route({}, "integrations.tasks.deliver_webhook")["queue"].name == app.conf.task_default_queue
    # The relay of exports whose worker died runs on the default queue: it must not wait behind exports.
    assert route({}, "integrations.tasks.relay_fhir_exports")["queue"].name == app.conf.task_default_queue
    assert settings.CELERY_BEAT_SCHEDULE["relay-fhir-exports"] == {
        "task": "integrations.tasks.relay_fhir_exports",
        "schedule": float(settings.WEBHOOK_RELAY_INTERVAL_SECONDS),
        "options": {"expires": float(settings.WEBHOOK_RELAY_INTERVAL_SECONDS)},
    }


@pytest.mark.django_db(transaction=True)
def test_a_queued_export_does_not_hold_up_a_webhook_delivery(
    client: Any, celery_worker: Any, receiver: Any, broker: Any, token_for: Any, writer: Any, patient: Any, doctor: Any
) -> None:
    """The worker thread consumes the default queue (a fresh one for this test) with one slot: were the export
    routed there, it would take the slot (and run) before the delivery."""
    subscribe(receiver.url(), ["appointment.booked"])
    exporter = token_for(["patients:read"])
    kick_off = client.get(
        "/fhir/R4/$export?_type=Patient", HTTP_AUTHORIZATION=f"Bearer {exporter}", HTTP_PREFER="respond-async"
    )
    assert kick_off.status_code == 202

    book(client, writer, booking(patient, doctor, at(DAY, "09:15"), at(DAY, "09:30")))

    (received,) = receiver.wait_for(1)
    assert received.headers["webhook-id"]
    delivery = WebhookDelivery.objects.get()
    job = ExportJob.objects.get()
    assert job.status == ExportJob.Status.QUEUED  # no worker of this test consumes the export queue
    [message] = _export_messages(broker)
    assert message["headers"]["task"] == services.EXPORT_TASK
    assert message["headers"]["argsrepr"] == repr((str(job.id),))
    assert message["properties"]["delivery_info"]["routing_key"] == QUEUE
    assert delivery.event.type == "appointment.booked"


def test_sending_an_export_task_lands_on_the_export_queue_in_redis(broker: Any) -> None:
    job_id = str(uuid.uuid4())
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    try:
        task_get(services.EXPORT_TASK).delay(job_id)
    finally:
        app.conf.task_always_eager = previous

    [message] = _export_messages(broker)
    assert (message["headers"]["task"], message["headers"]["argsrepr"]) == (services.EXPORT_TASK, repr((job_id,)))


@pytest.mark.parametrize(("role", "queues"), [("worker", ["celery"]), ("export-worker", [QUEUE])])
def test_each_worker_role_of_the_entrypoint_consumes_its_queues_only(role: str, queues: list[str]) -> None:
    """The role started as the image starts it (docker/entrypoint.sh), asked by Celery's remote control; it
    keeps the heartbeat of its own role only (what its liveness probe and /readyz read)."""
    beats = heartbeat.redis_connection()
    beats.delete(*(heartbeat.heartbeat_key(kind) for kind in heartbeat.ROLES))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "CELERY_CONCURRENCY": "1"}
    env["CELERY_EXPORT_CONCURRENCY"] = "1"
    process = subprocess.Popen(  # noqa: S603 - the entrypoint and a fixed role
        [str(ROOT / "docker/entrypoint.sh"), role], cwd=ROOT, env=env, start_new_session=True
    )
    try:
        consumed: dict[str, Any] | None = None
        for _ in range(60):
            consumed = app.control.inspect(timeout=1.0).active_queues()
            if consumed:
                break
        assert consumed is not None, f"the {role} role did not answer"
        [(node, active)] = consumed.items()
        assert sorted(queue["name"] for queue in active) == queues, node
        alive = {kind: sorted(heartbeat.heartbeats_fresh(role=kind)) for kind in heartbeat.ROLES}
        assert alive == {
            "worker": [node] if role == "worker" else [],
            "export-worker": [node] if role == "export-worker" else [],
            "beat": [],
        }
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
        beats.delete(*(heartbeat.heartbeat_key(kind) for kind in heartbeat.ROLES))


def test_make_run_starts_one_worker_for_both_queues() -> None:
    launcher = (ROOT / "clinic/launch.py").read_text()

    assert '"--queues", "celery,fhir-export"' in launcher
