"""Bearer-token authentication for the API (django-oauth-toolkit underneath)."""

from __future__ import annotations

from typing import Any, cast

from django.http import HttpRequest
from django.utils.translation import gettext as _
from oauth2_provider.contrib.rest_framework import OAuth2Authentication
from oauth2_provider.models import AbstractAccessToken
from rest_framework.request import Request

from clinic.api.bearer import access_token_load
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

    Expiry and `ApiClient.is_usable()` are checked on every request against the rows as they are now (no
    cache), so a revoked token or a deactivated client's tokens fail on the very next request.
    """

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            # Tokens come from the Authorization header only (docs/api-rules.md §7): the toolkit would also
            # take `access_token` from a form-encoded body, which leaks into logs and caches.
            request_context(request).oauth2_error = {}
            return None
        # The toolkit reads request.POST; on the DRF request that would parse the JSON body before the
        # client is even known (a malformed body would then hide the 401). The Django request does not.
        result, error = self._authenticate_bearer(request._request, credentials)
        context = request_context(request)
        context.oauth2_error = error
        if result is not None:
            context.client = result[1].application
            current_client_id.set(str(context.client.client_id))  # on this request's log lines
        return result

    def _authenticate_bearer(self, request: HttpRequest, token: str) -> tuple[tuple[Any, Any] | None, dict[str, Any]]:
        """What the toolkit's resource-server check decides (oauthlib's BearerToken and the toolkit's
        validate_bearer_token), and its reason for a refusal, with the token, its client and the client's
        branches read in one statement (clinic.api.bearer). The toolkit itself still decides the cases this
        service never issues: a token in the query string, a token restricted to a resource (RFC 8707).

        One difference, on purpose: oauthlib refused a query string with a malformed percent escape (`?x=%zz`)
        while parsing it, and that escaped as a 500. The token is in the header: the query is the view's to
        judge (a 400 unknown_parameter or invalid value), as it is without a token."""
        if "access_token" in request.GET:
            return self._toolkit(request)
        access_token = access_token_load(token)
        if access_token is not None and access_token.resource:
            return self._toolkit(request)
        invalid = {"error": "invalid_token", "error_description": _("The access token is invalid.")}
        if access_token is None:
            return None, invalid
        if access_token.is_expired():  # before the client, as the toolkit decides
            return None, {"error": "invalid_token", "error_description": _("The access token has expired.")}
        if not access_token.application.is_usable(request):
            return None, invalid
        return (access_token.user, access_token), {}

    def _toolkit(self, request: HttpRequest) -> tuple[tuple[Any, Any] | None, dict[str, Any]]:
        result = super().authenticate(request)
        # The toolkit leaves its reason on the Django request (its protocol, not ours).
        return result, getattr(request, "oauth2_error", None) or {}

    def authenticate_header(self, request: Request) -> str:
        error = request_context(request).oauth2_error
        description = error.get("error_description") or "A valid bearer token is required."
        return f'Bearer realm="{REALM}", error="invalid_token", error_description="{description}"'
