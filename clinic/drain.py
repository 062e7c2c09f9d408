"""The web pod's draining state, shared by the gunicorn master (which starts it on SIGTERM) and its workers
(whose /readyz reports it). No Django import: the gunicorn configuration imports this before Django exists.

The master names a file in CLINIC_DRAIN_FILE before it forks the workers; the file exists while it drains.
"""

from __future__ import annotations

import os

DRAIN_FILE_VARIABLE = "CLINIC_DRAIN_FILE"


def draining() -> bool:
    path = os.environ.get(DRAIN_FILE_VARIABLE)
    return bool(path) and os.path.exists(path)  # type: ignore[arg-type]
