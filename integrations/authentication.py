"""Bearer-token authentication for the API (django-oauth-toolkit underneath)."""

from __future__ import annotations

from typing import Any

from oauth2_provider.contrib.rest_framework import OAuth2Authentication
from rest_framework.request import Request

from clinic.api.permissions import REALM


class ApiClientAuthentication(OAuth2Authentication):
    """Authenticates the API client from its access token and records it for the audit log.

    The toolkit validates expiry and checks `ApiClient.is_usable()` on every request, so a deactivated
    client's tokens fail immediately.
    """

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        # The toolkit reads request.POST; on the DRF request that would parse the JSON body before the
        # client is even known (a malformed body would then hide the 401). The Django request does not.
        result = super().authenticate(request._request)
        request.oauth2_error = getattr(request._request, "oauth2_error", {})  # type: ignore[attr-defined]
        if result is not None:
            request._request.api_client = result[1].application  # type: ignore[attr-defined]
        return result

    def authenticate_header(self, request: Request) -> str:
        error = getattr(request, "oauth2_error", None) or {}
        description = error.get("error_description") or "A valid bearer token is required."
        return f'Bearer realm="{REALM}", error="invalid_token", error_description="{description}"'
