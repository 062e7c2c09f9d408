"""Tasks queued by name resolve in a process that never imported the task modules (a web process).

The in-process suite imports every tasks module, so only a fresh interpreter shows what gunicorn sees: a
lookup by name there once raised KeyError, a booking answered 500 and its notification was lost.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
import django
django.setup()
from clinic.celery import task_get
assert "appointments.tasks" not in sys.modules and "integrations.tasks" not in sys.modules
for name in ("appointments.tasks.appointment_notify", "integrations.tasks.deliver_webhook"):
    print(task_get(name).name)
"""


def test_a_task_is_found_by_name_in_a_process_that_imported_no_task_module() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "clinic.settings"}
    result = subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", PROBE], cwd=root, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["appointments.tasks.appointment_notify", "integrations.tasks.deliver_webhook"]
