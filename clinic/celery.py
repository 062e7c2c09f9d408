"""The Celery application: configuration comes from Django settings (namespace CELERY)."""

import os
import threading
import time
from typing import Any

from celery import Celery, Task
from celery.signals import task_postrun, task_prerun, worker_init

from clinic.heartbeat import WorkerHeartbeat
from clinic.task_metrics import task_metrics_record
from clinic.tracing import task_span_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")

app = Celery("clinic")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every worker refreshes a heartbeat in Redis while it is connected to the broker: `manage.py liveness worker`
# and /readyz read it (clinic.heartbeat). Beat's counterpart is its scheduler, CELERY_BEAT_SCHEDULER.
app.steps["consumer"].add(WorkerHeartbeat)


def task_get(name: str) -> Task:
    """The registered task `name`, for code that queues a task its own module cannot import (the task
    module imports it). In a web process nothing has imported the apps' task modules yet (Celery imports
    them when a worker starts), so the first lookup imports them, as the worker does. One thread at a time:
    two threads of a fresh gunicorn worker importing the task modules at once could see one another's
    half-imported module (Python's import deadlock avoidance) and miss a task (the fault suite found a 500
    on the first bookings after a restart); gunicorn's post_worker_init now imports them before serving."""
    if name not in app.tasks:
        with _task_import_lock:
            if name not in app.tasks:
                app.loader.import_default_modules()
    return app.tasks[name]


_task_import_lock = threading.Lock()


@worker_init.connect
def _json_shutdown_lines(**kwargs: Any) -> None:
    """With LOG_FORMAT json (DEBUG off) every line a role writes is a JSON object (docs/operations.md section
    10). The worker's start banner is off (`celery --quiet`, docker/entrypoint.sh), but Celery prints its
    shutdown lines ("worker: Warm shutdown (MainProcess)") from the signal handler with `safe_say`, straight
    to the stream and past logging: written here as the JSON line logging would give, still with a plain
    print (no logging lock taken inside a signal handler)."""
    from django.conf import settings

    if settings.LOG_FORMAT != "json":
        return
    import logging
    import sys

    import celery.apps.worker

    from clinic.json_logging import JsonFormatter

    formatter = JsonFormatter()

    def json_say(message: str, f: Any = sys.__stderr__) -> None:
        record = logging.LogRecord("celery.worker", logging.WARNING, __file__, 0, "%s", (message,), None)
        print(formatter.format(record), file=f, flush=True)

    # Celery writes its shutdown lines through this module-level function (not a logger); replacing it is the
    # only way to make them JSON. Typed as Any: celery's stubs do not declare it.
    worker_module: Any = celery.apps.worker
    worker_module.safe_say = json_say


# A span per task run when OpenTelemetry is on (clinic.tracing); by task id, since a thread pool runs several.
_task_spans: dict[str, Any] = {}


_task_started_at: dict[str, float] = {}


@task_prerun.connect
def _task_started(task_id: str, task: Task, **kwargs: Any) -> None:
    _task_started_at[task_id] = time.monotonic()
    span = task_span_start(task.name)
    if span is not None:
        _task_spans[task_id] = span


@task_postrun.connect
def _task_finished(task_id: str, task: Task, state: str | None = None, **kwargs: Any) -> None:
    started = _task_started_at.pop(task_id, None)
    if started is not None:
        task_metrics_record(task=task.name, state=state or "UNKNOWN", seconds=time.monotonic() - started)
    span = _task_spans.pop(task_id, None)
    if span is not None:
        span.set_attribute("celery.state", state or "")
        span.end()
