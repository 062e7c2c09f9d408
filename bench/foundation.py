"""Token exchange and GET /api/v1/branches under gunicorn, concurrency 1.

.venv/bin/python bench/foundation.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import sys

import requests
from harness import bench_client, gunicorn, manage, measure, prepare, token, write


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    server = prepare()
    manage("seed_demo", capture=True)
    client = bench_client("appointments:read")
    with gunicorn() as base:
        session = requests.Session()
        access = token(session, base, client)
        headers = {"Authorization": f"Bearer {access}"}
        rows = [
            measure("POST /api/v1/auth/token", lambda: token(session, base, client), args.requests),
            measure(
                "GET /api/v1/branches",
                lambda: session.get(f"{base}/api/v1/branches", headers=headers).raise_for_status(),
                args.requests,
            ),
        ]
    del server
    write("foundation", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
