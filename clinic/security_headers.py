"""Headers that keep patient data out of caches and the admin and docs pages out of reach of injected
scripts and framing (docs/api-rules.md §7). HSTS, nosniff and frame denial come from Django's own
SecurityMiddleware and XFrameOptionsMiddleware (settings SECURE_*, X_FRAME_OPTIONS)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from clinic.api.paths import is_public_api_path

DATA_PREFIXES = ("/api/", "/fhir/")
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


# Redoc runs its search in a web worker it starts from a blob: URL.
REDOC_CONTENT_SECURITY_POLICY = CONTENT_SECURITY_POLICY + "; worker-src 'self' blob:"
_DOCS_PAGES = {"/api/v1/docs": CONTENT_SECURITY_POLICY, "/api/v1/redoc": REDOC_CONTENT_SECURITY_POLICY}


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.admin_prefix = "/admin/"

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        path = request.path
        if path.startswith(DATA_PREFIXES) and not is_public_api_path(path):
            # Every API answer may carry patient data (a profile, a name in an invoice or appointment, a
            # problem naming a patient): no shared or browser cache may keep it.
            response["Cache-Control"] = "no-store"
        if settings.CONTENT_SECURITY_POLICY_ENABLED and (path.startswith(self.admin_prefix) or path in _DOCS_PAGES):
            response.setdefault("Content-Security-Policy", _DOCS_PAGES.get(path, CONTENT_SECURITY_POLICY))
        return response
