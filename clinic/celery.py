"""The Celery application: configuration comes from Django settings (namespace CELERY)."""

import os

from celery import Celery, Task

from clinic.heartbeat import WorkerHeartbeat

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
    them when a worker starts), so the first lookup imports them, as the worker does."""
    if name not in app.tasks:
        app.loader.import_default_modules()
    return app.tasks[name]
