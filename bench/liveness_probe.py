"""What the worker, export-worker and beat liveness probes cost (issue 35: `manage.py liveness` took 9-12 s in a pod
against a 10 s timeout; docs/operations.md section 8).

    .venv/bin/python bench/liveness_probe.py [--runs 20] [--output bench/results/liveness_probe.md]

Times, as the kubelet runs them (a process each, its exit status the answer), the containers' probe
`python clinic/liveness_probe.py worker` (a heartbeat file touched for the run, in a TMPDIR of its own) and,
for comparison, `python manage.py liveness worker --any` (a full Django start and a Redis query; it needs the
checkout's settings: DATABASE_URL, REDIS_URL or .env). Wall-clock seconds, median and maximum.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(command: list[str], env: dict[str, str], runs: int) -> tuple[float, float, int]:
    seconds = []
    status = 0
    for _ in range(runs):
        started = time.monotonic()
        status = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=False).returncode
        seconds.append(time.monotonic() - started)
    return statistics.median(seconds), max(seconds), status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "liveness_probe.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "TMPDIR": folder}
        (Path(folder) / "clinic-heartbeat-worker").touch()
        probe = timed([sys.executable, "clinic/liveness_probe.py", "worker"], env, args.runs)
    manage = timed(
        [sys.executable, "manage.py", "liveness", "worker", "--any"], dict(os.environ), max(3, args.runs // 4)
    )
    load = os.getloadavg()[0]
    lines = [
        "# Liveness probe cost (`bench/liveness_probe.py`)",
        "",
        f"Run {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores (shared), load {load:.1f}.",
        "Wall-clock seconds of one probe process, as the kubelet runs it.",
        "",
        "| probe | runs | median s | max s |",
        "|---|---|---|---|",
        f"| `python clinic/liveness_probe.py worker` (the containers' probe) | {args.runs} | {probe[0]:.3f} | {probe[1]:.3f} |",
        f"| `python manage.py liveness worker --any` (before; exit {manage[2]}) | {max(3, args.runs // 4)} | {manage[0]:.2f} | {manage[1]:.2f} |",
        "",
        "In a pod with the worker's CPU limit the Django start of `manage.py liveness` took 9-12 s (issue 35).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.output.write_text(text)
    return 0 if probe[2] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
