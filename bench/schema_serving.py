"""Latency of GET /api/v1/schema as production serves it (gunicorn, DEBUG off), once the process holds it.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/schema_serving.py [--requests 300]

One gunicorn worker (so every request meets the same in-process cache), one keep-alive connection,
concurrency 1. The first request of each representation builds it and is reported apart (the document is
built once per process, then rendered once per format); then, per representation, `--requests` requests
after a warm-up: YAML and JSON, each plain and gzip-compressed, and a conditional GET answered 304. Bodies
are read raw (not decompressed by the client), so the time is the server's and the transfer's. Writes
bench/results/schema_serving.md.
"""

from __future__ import annotations

import argparse
import functools
import platform
import time
from datetime import UTC, datetime
from typing import Any

import requests
from harness import RESULTS, gunicorn, measure, prepare

VARIANTS: list[tuple[str, dict[str, str]]] = [
    ("YAML, plain", {"Accept": "application/vnd.oai.openapi", "Accept-Encoding": "identity"}),
    ("YAML, gzip", {"Accept": "application/vnd.oai.openapi", "Accept-Encoding": "gzip"}),
    ("JSON, plain", {"Accept": "application/json", "Accept-Encoding": "identity"}),
    ("JSON, gzip", {"Accept": "application/json", "Accept-Encoding": "gzip"}),
]


def _get(session: requests.Session, url: str, headers: dict[str, str]) -> tuple[int, int, str]:
    response = session.get(url, headers=headers, stream=True)
    body = response.raw.read(decode_content=False)
    return response.status_code, len(body), response.headers.get("ETag", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    prepare()
    rows: list[dict[str, Any]] = []
    first: list[str] = []
    with gunicorn(workers=1) as base, requests.Session() as session:
        url = f"{base}/api/v1/schema"
        for label, headers in VARIANTS:
            started = time.perf_counter()
            status, size, etag = _get(session, url, headers)
            assert status == 200, status
            first.append(f"| {label} | {size:,} | {(time.perf_counter() - started) * 1000:.0f} |")
            row = measure(label, functools.partial(_get, session, url, headers), args.requests)
            rows.append({**row, "bytes": size})
        conditional = {**VARIANTS[3][1], "If-None-Match": etag}
        assert _get(session, url, conditional)[0] == 304
        rows.append(
            {
                **measure("JSON, gzip, If-None-Match (304)", lambda: _get(session, url, conditional), args.requests),
                "bytes": 0,
            }
        )
    lines = [
        "# Serving the OpenAPI document (bench/schema_serving.py)",
        "",
        f"{datetime.now(UTC):%Y-%m-%d}, {platform.node()}: one gunicorn worker (DEBUG off), one keep-alive connection, "
        f"concurrency 1, {args.requests} requests per row after a warm-up of 50. Target: p95 under 200 ms.",
        "",
        "First request of each representation (builds the document once per process, then renders that format):",
        "",
        "| representation | bytes sent | ms |",
        "|---|---|---|",
        *first,
        "",
        "Then, served from the process's memory:",
        "",
        "| representation | bytes sent | requests | p50 ms | p95 ms | p99 ms |",
        "|---|---|---|---|---|---|",
        *[
            f"| {r['endpoint']} | {r['bytes']:,} | {r['requests']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} |"
            for r in rows
        ],
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "schema_serving.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
