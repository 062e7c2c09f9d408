"""Probes and metrics answered before the rest of the middleware: whatever the Host header says.

Kubernetes probes and Prometheus scrapes address the pod by its IP, which is (rightly) not in ALLOWED_HOSTS:
CommonMiddleware answered them 400 and the pod never became ready. These paths answer no user, read no
session and take no token, so the Host check protects nothing on them; they are not audited either.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase

from clinic.api import meta_views, metrics_view


class ProbeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.views: dict[str, Callable[[HttpRequest], HttpResponseBase]] = {
            "/healthz": meta_views.healthz,
            "/readyz": meta_views.readyz,
            "/metrics": metrics_view.metrics,
        }

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        view = self.views.get(request.path_info)
        if view is None or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        return view(request)
