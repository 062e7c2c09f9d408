"""Latency of the foundation endpoints under gunicorn, as production runs them.

    .venv/bin/python bench/foundation.py [--requests 1000]

Uses DATABASE_URL (or the embedded PostgreSQL, like `make run`) and Redis; migrates, seeds the demo
data, creates a benchmark client, starts gunicorn with DEBUG off, then measures sequential requests
over one keep-alive connection (concurrency 1). Writes bench/results/foundation.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clinic.launch import manage, prepare_environment  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(round(q * (len(ordered) - 1))), len(ordered) - 1)]


def measure(label: str, call, count: int) -> dict[str, float | str | int]:  # type: ignore[no-untyped-def]
    for _ in range(min(50, count)):  # warm-up: connections, caches, code paths
        call()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return {
        "endpoint": label,
        "requests": count,
        "p50_ms": round(statistics.median(samples), 2),
        "p95_ms": round(percentile(samples, 0.95), 2),
        "p99_ms": round(percentile(samples, 0.99), 2),
        "throughput_rps": round(count / (sum(samples) / 1000), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    server = prepare_environment(redis_default="redis://127.0.0.1:6379/0")
    manage("migrate", "--no-input", "-v", "0")
    manage("seed_demo", capture=True)
    created = json.loads(
        manage(
            "create_api_client", "--name", f"bench-{int(time.time())}", "--scopes", "appointments:read",
            "--rate-limit", "100000", "--json", capture=True,
        )
    )
    port = free_port()
    env = {**os.environ, "DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING"}
    gunicorn = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "clinic.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", "2", "--log-level", "warning"],
        cwd=ROOT, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                requests.get(f"{base}/healthz", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        session = requests.Session()
        form = {"grant_type": "client_credentials"}
        auth = (created["client_id"], created["client_secret"])

        def token() -> str:
            response = session.post(f"{base}/api/v1/auth/token", data=form, auth=auth)
            response.raise_for_status()
            return str(response.json()["access_token"])

        access = token()

        def branches() -> None:
            session.get(f"{base}/api/v1/branches", headers={"Authorization": f"Bearer {access}"}).raise_for_status()

        rows = [measure("POST /api/v1/auth/token", token, args.requests),
                measure("GET /api/v1/branches", branches, args.requests)]
    finally:
        gunicorn.terminate()
        gunicorn.wait(10)
        del server
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "foundation.json").write_text(json.dumps(rows, indent=2))
    lines = ["| endpoint | requests | p50 ms | p95 ms | p99 ms | req/s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['endpoint']} | {r['requests']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['throughput_rps']} |" for r in rows]
    (out / "foundation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
