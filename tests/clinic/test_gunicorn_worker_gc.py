"""The web role's workers freeze the loaded application out of the garbage collector's reach (clinic.gunicorn_config
post_worker_init): full collections otherwise walked it and stalled requests for 80-130 ms."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
import django
django.setup()
from clinic import gunicorn_config
before = gc.get_freeze_count()
gunicorn_config.post_worker_init(None)
print(before, gc.get_freeze_count(), "lab.api.viewsets" in sys.modules, "pharmacy.api.viewsets" in sys.modules)
"""


def test_a_worker_loads_every_view_then_freezes_what_it_loaded() -> None:
    result = subprocess.run(  # noqa: S603 - fixed arguments
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode == 0, result.stderr
    before, frozen, lab_loaded, pharmacy_loaded = result.stdout.split()
    assert before == "0"
    assert int(frozen) > 50_000
    assert (lab_loaded, pharmacy_loaded) == ("True", "True")
