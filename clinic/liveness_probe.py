"""The liveness probe of the worker, export-worker and beat containers, in milliseconds:

    python clinic/liveness_probe.py worker|export-worker|beat

exits 0 while this container's role has refreshed its local heartbeat file within three heartbeat intervals
(3 x ROLE_HEARTBEAT_SECONDS), 1 otherwise. The role touches the file right after each heartbeat it records in
Redis succeeded (clinic/heartbeat.py: a worker while it is connected to the broker and its event loop turns,
beat after every scheduler tick), so the file is exactly as fresh as this container's heartbeat in Redis, and
the probe need not ask Redis. `manage.py liveness` asked Redis and paid a full Django start for it: 9-12 s
against a 10 s probe timeout in the cluster (issue 35). This file imports nothing but the standard library,
and is run as a script, so not even the `clinic` package (which imports Celery) is loaded.

The file is per container (per host: two workers on one machine share it); `manage.py liveness --node/--any`
still answers for a given node from Redis.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROLES = ("worker", "export-worker", "beat")
DEFAULT_INTERVAL_SECONDS = 10  # clinic/settings.py ROLE_HEARTBEAT_SECONDS


def heartbeat_file(role: str) -> Path:
    """Where this container's `role` marks its heartbeats (under TMPDIR, /tmp: an emptyDir in the pods)."""
    return Path(tempfile.gettempdir()) / f"clinic-heartbeat-{role}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ROLES:
        print(f"usage: python clinic/liveness_probe.py {'|'.join(ROLES)}", file=sys.stderr)
        return 2
    role = argv[0]
    max_age = 3 * int(os.environ.get("ROLE_HEARTBEAT_SECONDS") or DEFAULT_INTERVAL_SECONDS)
    try:
        age = time.time() - heartbeat_file(role).stat().st_mtime
    except FileNotFoundError:
        print(f"{role}: no heartbeat yet (not started, or stopped)", file=sys.stderr)
        return 1
    if age > max_age:
        print(f"{role}: last heartbeat {age:.0f} s ago (over {max_age} s: hung or cut off from Redis)", file=sys.stderr)
        return 1
    print(f"{role}: alive, heartbeat {age:.1f} s ago")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
