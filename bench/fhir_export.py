"""FHIR Bulk Data $export at scale (issue 18): resources per second and peak memory of one export job.

    python bench/fhir_export.py [--types Patient,Encounter] [--name fhir_export]

Runs the job the Celery task runs (integrations.fhir.services.export_job_run) in a fresh child process, for
a client with every read scope and no branch restriction (the system-level export of every patient), and
reads the child's resident memory every 0.2 s while it writes: peak RSS, and RSS after the first 10 % of
the rows against the peak (flat memory means the two are close, whatever the number of rows). The files are
deleted afterwards. The database must hold generated data (bench/scale.py fills it); DATABASE_URL and
REDIS_URL as for bench/scale.py. `bench/scale.py --only fhir_export` runs the same measurement.

Target: >= 5,000 resources/s with flat memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("results")
TARGET_PER_SECOND = 5000
READ_SCOPES = ["patients:read", "appointments:read", "emr:read", "lab:read", "pharmacy:read"]


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def child(types: list[str]) -> None:
    """In the child: one export job, timed; prints a JSON line."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    django.setup()
    from integrations.fhir.models import ExportJob
    from integrations.fhir.services import export_job_run
    from integrations.models import ApiClient

    client = ApiClient.objects.create(name=f"bench-export-{time.time_ns()}", allowed_scopes=READ_SCOPES)
    job = ExportJob.objects.create(client=client, level="system", types=types, request_url="bench")
    print(json.dumps({"ready": True, "rss_kb": _rss_kb(os.getpid())}), flush=True)
    started = time.perf_counter()
    cpu = time.process_time()
    done = export_job_run(job_id=job.id)
    seconds = time.perf_counter() - started
    if done is None or done.status != ExportJob.Status.COMPLETED:
        raise SystemExit(f"the export did not complete: {done and done.error}")
    counts = {entry["type"]: entry["count"] for entry in done.output}
    print(json.dumps({"seconds": seconds, "cpu_seconds": time.process_time() - cpu, "counts": counts}), flush=True)


def measure(types: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "FHIR_EXPORT_DIR": folder, "DEBUG": "false", "LOG_LEVEL": "WARNING"}
        process = subprocess.Popen(
            [sys.executable, __file__, "--child", "--types", ",".join(types)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        samples: list[tuple[float, int]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append((time.monotonic(), _rss_kb(process.pid)))
                stop.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        result = json.loads(process.stdout.readline())
        stop.set()
        sampler.join()
        if process.wait() != 0:
            raise SystemExit(f"the export child failed ({process.returncode})")
        size = sum(path.stat().st_size for path in Path(folder).rglob("*.ndjson"))
    total = sum(result["counts"].values())
    rss = [kb for _, kb in samples if kb]
    early = rss[: max(1, len(rss) // 10)]
    return {
        "types": types,
        "counts": result["counts"],
        "resources": total,
        "seconds": round(result["seconds"], 1),
        "cpu_seconds": round(result["cpu_seconds"], 1),
        "per_second": round(total / result["seconds"]),
        "ndjson_mb": round(size / 1e6, 1),
        "rss_mb_at_start": round(ready["rss_kb"] / 1024),
        "rss_mb_after_first_tenth": round(max(early) / 1024),
        "rss_mb_peak": round(max(rss) / 1024),
        "validate_output": os.environ.get("FHIR_VALIDATE_OUTPUT", "sample"),
    }


def markdown(result: dict[str, Any]) -> str:
    met = result["per_second"] >= TARGET_PER_SECOND
    counts = ", ".join(f"{name} {count:,}" for name, count in result["counts"].items())
    return "\n".join(
        [
            "# FHIR bulk export",
            "",
            f"`bench/fhir_export.py`, {time.strftime('%Y-%m-%dT%H:%M:%S%z')}, one export job in one process "
            f"(the Celery task's code), FHIR_VALIDATE_OUTPUT={result['validate_output']}.",
            "",
            "| resources | seconds | CPU s | resources/s | NDJSON MB | RSS at start | after 10 % | peak |",
            "|---|---|---|---|---|---|---|---|",
            f"| {result['resources']:,} ({counts}) | {result['seconds']} | {result['cpu_seconds']} "
            f"| {result['per_second']:,} | {result['ndjson_mb']} | {result['rss_mb_at_start']} MB "
            f"| {result['rss_mb_after_first_tenth']} MB | {result['rss_mb_peak']} MB |",
            "",
            f"Target >= {TARGET_PER_SECOND:,} resources/s: {'met' if met else '**not met**'}.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", default="Patient")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--name", default="fhir_export")
    args = parser.parse_args()
    types = [name for name in args.types.split(",") if name]
    if args.child:
        child(types)
        return 0
    result = measure(types)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    report = markdown(result)
    (RESULTS / f"{args.name}.md").write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
