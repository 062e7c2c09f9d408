"""Request counts and latencies per route for /metrics (clinic.metrics).

Labelled by the URL pattern's name (`patient-detail`), never the raw path: ids in paths would make one
time series per patient, and a path can carry what a patient typed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

import clinic.metrics as metrics
from clinic.api.request_id import current_route

_PROBES = frozenset({"/healthz", "/readyz", "/metrics"})


def route_label(request: HttpRequest) -> str:
    if request.path_info in _PROBES:
        return request.path_info.lstrip("/")
    match = getattr(request, "resolver_match", None)
    return (match.view_name or "unnamed") if match is not None else "unmatched"


class RequestMetricsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def process_view(self, request: HttpRequest, *args: object) -> None:
        current_route.set(route_label(request))  # on this request's log lines from here on

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = self.get_response(request)
        route = route_label(request)
        method = request.method if request.method in _METHODS else "other"
        metrics.REQUESTS.labels(route=route, method=method, status=f"{response.status_code // 100}xx").inc()
        metrics.REQUEST_SECONDS.labels(route=route, method=method).observe(time.perf_counter() - started)
        if response.status_code == 503 and response.has_header("Retry-After") and route != "readyz":
            metrics.DATABASE_UNAVAILABLE.inc()
        return response


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
