"""The service's Prometheus metrics (docs/operations.md §1), declared once; /metrics serves them.

Under gunicorn each worker is a process of its own: with PROMETHEUS_MULTIPROC_DIR set (docker/entrypoint.sh
sets it for the web role) prometheus_client keeps every process's values in files there and /metrics adds
them up, so a scrape sees the pod, not whichever worker answered. Gauges that describe the database (the
outbox backlog) are read at scrape time instead, by the collector in clinic.api.metrics_view.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "clinic_http_requests_total",
    "HTTP requests answered, by route name (never the raw path), method and status class.",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "clinic_http_request_duration_seconds",
    "Time to answer an HTTP request, by route name and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
DATABASE_UNAVAILABLE = Counter(
    "clinic_database_unavailable_total",
    "Requests answered 503 because PostgreSQL (or PgBouncer) was unreachable or out of a resource (a full disk).",
)
RATELIMIT_FALLBACK = Counter(
    "clinic_ratelimit_fallback_total",
    "Rate-limit decisions taken by the per-process approximation because Redis did not answer.",
)
REDIS_UNAVAILABLE = Counter(
    "clinic_redis_unavailable_total", "Operations that found Redis unreachable, by user of Redis.", ["user"]
)
OUTBOX_PUBLISH_FAILED = Counter(
    "clinic_outbox_publish_failed_total",
    "Outbox messages (webhook deliveries, notifications) the broker refused at commit; the relay sends them.",
    ["kind"],
)
