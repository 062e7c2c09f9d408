"""Which paths are which, for the middleware that treats them differently (one list, not one per module)."""

from __future__ import annotations

API_PREFIX = "/api/"
FHIR_PREFIX = "/fhir/"
# The token endpoints answer in RFC 6749 bodies, not problem+json (docs/api-rules.md §2).
OAUTH_PATHS = frozenset({"/api/v1/auth/token", "/api/v1/auth/revoke"})
# Public documentation: no patient data, no audit row, no rate limit, cacheable.
PUBLIC_API_PATHS = (
    "/api/v1/schema",
    "/api/v1/docs",
    "/api/v1/redoc",
    "/api/v1/problems",
    "/fhir/R4/metadata",
    "/fhir/R4/.well-known/smart-configuration",
)


def is_public_api_path(path: str) -> bool:
    # Whole path segments only: /api/v1/schemas is an unknown API route (a 404 to audit), not the schema.
    return any(path == p or path.startswith(p + "/") for p in PUBLIC_API_PATHS)
