"""A hook for the worker processes of tests/integrations/fhir/test_bulk_export_recovery.py (tests.worker's
`--setup`): an export that takes SECONDS_PER_ROW per resource and renews its lease every ROWS_PER_CHUNK rows,
so a test can kill its worker in the middle of a file, whatever the machine's speed."""

from __future__ import annotations

import time
from typing import Any

ROWS_PER_CHUNK = 5
SECONDS_PER_ROW = 0.1


def slow_export() -> None:
    from integrations.fhir import r4, services

    check_line = r4.check_line

    def slow_check_line(*args: Any, **kwargs: Any) -> Any:
        time.sleep(SECONDS_PER_ROW)
        return check_line(*args, **kwargs)

    services.CHUNK = ROWS_PER_CHUNK  # type: ignore[misc]
    r4.check_line = slow_check_line  # type: ignore[assignment]
