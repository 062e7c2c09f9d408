"""Bearer-token authentication for the API (django-oauth-toolkit underneath)."""

from __future__ import annotations

from typing import Any, cast

from oauth2_provider.contrib.rest_framework import OAuth2Authentication
from oauth2_provider.models import AbstractAccessToken
from rest_framework.request import Request

from clinic.api.context import request_context
from clinic.api.permissions import REALM
from clinic.api.request_id import current_client_id
from integrations.models import ApiClient


def request_token(request: Request) -> AbstractAccessToken | None:
    """The access token of an authenticated API request (DRF types request.auth loosely)."""
    return cast(AbstractAccessToken | None, request.auth)


def request_client(request: Request) -> ApiClient:
    """The API client of an authenticated request; only call after authentication succeeded."""
    token = request_token(request)
    assert token is not None, "request_client() on an unauthenticated request"
    return cast(ApiClient, token.application)


class ApiClientAuthentication(OAuth2Authentication):
    """Authenticates the API client from its access token and records it for the audit log.

    The toolkit validates expiry and checks `ApiClient.is_usable()` on every request, so a deactivated
    client's tokens fail immediately.
    """

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            # Tokens come from the Authorization header only (CONTRACT section 11): the toolkit would also
            # take `access_token` from a form-encoded body, which leaks into logs and caches.
            request_context(request).oauth2_error = {}
            return None
        # The toolkit reads request.POST; on the DRF request that would parse the JSON body before the
        # client is even known (a malformed body would then hide the 401). The Django request does not.
        result = super().authenticate(request._request)
        context = request_context(request)
        # The toolkit leaves its reason on the Django request (its protocol, not ours).
        context.oauth2_error = getattr(request._request, "oauth2_error", None) or {}
        if result is not None:
            context.client = result[1].application
            current_client_id.set(str(context.client.client_id))  # on this request's log lines
        return result

    def authenticate_header(self, request: Request) -> str:
        error = request_context(request).oauth2_error
        description = error.get("error_description") or "A valid bearer token is required."
        return f'Bearer realm="{REALM}", error="invalid_token", error_description="{description}"'
