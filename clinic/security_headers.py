"""Headers that keep patient data out of caches and the admin and docs pages out of reach of injected
scripts and framing (CONTRACT section 11). HSTS, nosniff and frame denial come from Django's own
SecurityMiddleware and XFrameOptionsMiddleware (settings SECURE_*, X_FRAME_OPTIONS)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

DATA_PREFIXES = ("/api/", "/fhir/")
# Public documentation that holds no patient data, and that clients may cache.
PUBLIC_PATHS = ("/api/v1/schema", "/api/v1/docs", "/api/v1/problems")
# The admin and Swagger UI load scripts and styles from this origin only (the docs' init script is served
# by the split view, not inline); both use inline style attributes, and icons as data: URIs.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


def _public(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in PUBLIC_PATHS)


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.admin_prefix = "/admin/"

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        path = request.path
        if path.startswith(DATA_PREFIXES) and not _public(path):
            # Every API answer may carry patient data (a profile, a name in an invoice or appointment, a
            # problem naming a patient): no shared or browser cache may keep it.
            response["Cache-Control"] = "no-store"
        if settings.CONTENT_SECURITY_POLICY_ENABLED and (path.startswith(self.admin_prefix) or path == "/api/v1/docs"):
            response.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
