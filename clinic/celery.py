"""The Celery application: configuration comes from Django settings (namespace CELERY)."""

import os

from celery import Celery

from clinic.heartbeat import WorkerHeartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")

app = Celery("clinic")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every worker refreshes a heartbeat in Redis while it is connected to the broker: `manage.py liveness worker`
# and /readyz read it (clinic.heartbeat). Beat's counterpart is its scheduler, CELERY_BEAT_SCHEDULER.
app.steps["consumer"].add(WorkerHeartbeat)
