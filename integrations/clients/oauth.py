"""The OAuth 2.0 token and revocation endpoints (client credentials only), on django-oauth-toolkit.

A client authenticates with its secret (HTTP Basic or the form), or at the token endpoint with a JWT signed
by a key of its registered JWKS (RFC 7523 `private_key_jwt`, SMART Backend Services: docs/fhir.md
section 7), and may ask for SMART scopes, which map onto ours. Per-client controls apply to token exchanges
too: after the client authenticated, a request from an address outside its allow-list is refused (403),
and the request counts against the client's token budget (TOKEN_RATE_LIMIT a minute, 429 beyond it), which
is apart from its API budget: asking for a token never costs an API call (docs/api-rules.md §3).

Whether the client authenticated is recorded for the anonymous per-address limit: a request with valid
credentials is never counted against nor refused by it, a request without them is (clinic.api.anonymous_limit).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import unquote_plus

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.debug import sensitive_post_parameters
from oauth2_provider import cimd
from oauth2_provider import views as oauth_views
from oauth2_provider.models import get_access_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.signals import app_authorized
from oauthlib.oauth2.rfc6749 import errors as oauth_errors

from clinic.api import ratelimit
from clinic.api.context import request_context
from clinic.api.errors import DATABASE_RETRY_AFTER_SECONDS, is_database_unavailable, oauth_error_response
from clinic.api.network import CLIENT_IP_META_KEY, client_ip
from clinic.text import CONTROL_CHARACTERS
from integrations.clients.assertions import (
    ASSERTION_TYPE,
    AssertionRefused,
    VerifiedAssertion,
    assertion_client_id,
    assertion_verify,
)
from integrations.clients.services import client_assertion_record
from integrations.fhir.smart import ScopeRefused, scopes_grant
from integrations.models import ApiClient

TOKEN_CONTEXT_META_KEY = "CLINIC_TOKEN_CONTEXT"  # noqa: S105 - a request.META key, not a secret
logger = logging.getLogger(__name__)


class _RedactIssuedToken(logging.Filter):
    """oauthlib logs every issued token response at DEBUG; a bearer token in a log file is a live credential."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                {**arg, "access_token": "[redacted]"} if isinstance(arg, dict) and "access_token" in arg else arg
                for arg in record.args
            )
        return True


logging.getLogger("oauthlib.oauth2.rfc6749.grant_types.client_credentials").addFilter(_RedactIssuedToken())


@dataclass
class TokenRequestContext:
    """Shared with the validator: oauthlib copies request.META shallowly, so this object is the same one."""

    client: ApiClient | None = None
    rate_limit: ratelimit.RateLimitDecision | None = None
    assertion: str | None = None  # the client_assertion, when the client authenticates by one
    audience: str = ""  # the token endpoint's absolute URL, which an assertion's aud must be
    verified: VerifiedAssertion | None = None
    issues_token: bool = False  # the token endpoint, whose scope check comes after the client's authentication
    authenticated: bool = False  # the client proved who it is (its secret, or an assertion not seen before)


class AddressNotAllowed(oauth_errors.OAuth2Error):
    error = "access_denied"
    status_code = 403
    description = "This client may not request tokens from this address."


class RateLimitExceeded(oauth_errors.OAuth2Error):
    error = "rate_limited"
    status_code = 429

    def __init__(self, decision: ratelimit.RateLimitDecision, **kwargs: Any) -> None:
        self.wait = max(decision.reset_seconds, 1)
        super().__init__(description=f"Too many token requests for this client; retry in {self.wait} s.", **kwargs)
        self.decision = decision

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.wait), **self.decision.headers()}


def token_budget_key(client: ApiClient) -> str:
    """The rate-limit key of a client's token requests: apart from its API budget (keyed by its pk alone)."""
    return f"token:{client.pk}"


@cache
def _client_by_client_id() -> str:
    """Every token request reads its client by client_id: a constant statement (docs/architecture.md §6;
    composing `filter(client_id=...).first()` through the ORM was a third of the exchange's CPU), the instance
    built by `raw()` with the fields' converters. client_id is unique, so no order is needed."""
    meta = ApiClient._meta
    return f'SELECT * FROM "{meta.db_table}" WHERE "{meta.get_field("client_id").column}" = %s'  # noqa: S608 - _meta


class ApiClientValidator(OAuth2Validator):
    def _load_application(self, client_id: str, request: Any) -> ApiClient | None:
        """The toolkit's lookup (the client cached on the request, else by client_id; None when unknown or
        not usable). A miss goes to the toolkit's own (its metadata-document clients), so only a refused
        exchange pays a second look."""
        cached = request.client
        if isinstance(cached, ApiClient) and cached.client_id == client_id and cached.is_usable(request):
            return cached
        request.client = None
        if not client_id or "\x00" in client_id:  # none, or one PostgreSQL cannot hold: no such client
            return None
        found = next(iter(ApiClient.objects.raw(_client_by_client_id(), [client_id])), None)
        if found is None:
            return super()._load_application(client_id, request)
        client = cimd.refresh_if_stale(found, request=request)
        if not client.is_usable(request):
            return None
        request.client = client
        return client

    def save_bearer_token(self, token: dict[str, Any], request: Any, *args: Any, **kwargs: Any) -> Any:
        """Client credentials issue an access token only: its INSERT is the one write, atomic by itself, so
        the toolkit's transaction (BEGIN and COMMIT, two round trips) is for the refresh-token grants."""
        if request.grant_type == "client_credentials" and not token.get("refresh_token"):
            return self._save_bearer_token(token, request, *args, **kwargs)
        return super().save_bearer_token(token, request, *args, **kwargs)

    def _create_access_token(
        self, expires: Any, request: Any, token: dict[str, Any], source_refresh_token: Any = None
    ) -> Any:
        """The toolkit's token (same fields, the RFC 9700 checksum by the field's pre_save), inserted without
        the toolkit's UPDATE-then-INSERT guess: it is new."""
        id_token = token.get("id_token")
        access_token = get_access_token_model()(
            user=request.user,
            scope=token["scope"],
            expires=expires,
            id_token=self._load_id_token(id_token) if id_token else None,
            application=request.client,
            source_refresh_token=source_refresh_token,
            resource=getattr(request, "resource", []),
        )
        self._set_token_value(access_token, token["access_token"])
        access_token.save(force_insert=True)
        return access_token

    def authenticate_client(self, request: Any, *args: Any, **kwargs: Any) -> bool:
        context: TokenRequestContext | None = request.headers.get(TOKEN_CONTEXT_META_KEY)
        if context is not None and context.assertion is not None:
            authenticated = self._authenticate_by_assertion(request, context)
        else:
            authenticated = super().authenticate_client(request, *args, **kwargs)
        client = request.client if isinstance(request.client, ApiClient) else None
        if context is not None:
            context.client = client  # recorded in the audit log even when the secret was wrong
        if not authenticated or client is None:
            return False
        if client.assertion_only and context is not None and context.verified is None:
            raise oauth_errors.InvalidClientError(
                description="This client authenticates with a signed client assertion (private_key_jwt) only.",
                request=request,
            )
        if context is not None:
            # Valid credentials: whatever refuses the request from here on, it was not a guess. (An assertion
            # whose jti turns out to be seen before is taken back in _record_assertion.)
            context.authenticated = True
        if not client.allows_address(request.headers.get(CLIENT_IP_META_KEY) or None):
            if context is not None:  # no quota used, but the headers still report it
                context.rate_limit = ratelimit.hit(token_budget_key(client), settings.TOKEN_RATE_LIMIT, record=False)
            raise AddressNotAllowed(request=request)
        decision = ratelimit.hit(token_budget_key(client), settings.TOKEN_RATE_LIMIT)
        if context is not None:
            context.rate_limit = decision
        if not decision.admitted:
            raise RateLimitExceeded(decision, request=request)
        if context is not None and context.verified is not None and not context.issues_token:
            self._record_assertion(request, context)  # revocation: nothing is checked after this
        return True

    @staticmethod
    def _record_assertion(request: Any, context: TokenRequestContext) -> None:
        """Record the assertion's jti once nothing else can refuse the request; a jti seen before refuses it."""
        verified = context.verified
        assert verified is not None
        if not client_assertion_record(client=verified.client, jti=verified.jti, expires_at=verified.expires_at):
            context.authenticated = False  # a replayed assertion proves nothing
            raise oauth_errors.InvalidClientError(
                description="This client assertion was used already (its jti was seen); sign a new one.",
                request=request,
            )

    def _authenticate_by_assertion(self, request: Any, context: TokenRequestContext) -> bool:
        """The client the assertion names, if the assertion verifies with its keys; refusals say why."""
        assertion = context.assertion or ""
        client_id = request.client_id or assertion_client_id(assertion)
        client = self._load_application(client_id, request) if client_id else None
        if not isinstance(client, ApiClient):
            return False
        try:
            context.verified = assertion_verify(client=client, assertion=assertion, audience=context.audience)
        except AssertionRefused as exc:
            context.client = client
            raise oauth_errors.InvalidClientError(description=str(exc), request=request) from None
        return True

    def validate_scopes(
        self, client_id: str, scopes: list[str], client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        try:
            granted = scopes_grant(scopes, client.allowed_scopes)
        except ScopeRefused as exc:
            raise oauth_errors.InvalidScopeError(description=str(exc), request=request) from None
        # A client allowed no scope would otherwise get a token with scope "": refuse it (invalid_scope).
        if not (granted and super().validate_scopes(client_id, granted, client, request, *args, **kwargs)):
            return False
        request.scopes = granted  # what the token carries, and the response's `scope`
        context: TokenRequestContext | None = request.headers.get(TOKEN_CONTEXT_META_KEY)
        # oauthlib's last check before it issues the token: so a refused request leaves no jti behind.
        if context is not None and context.verified is not None:
            self._record_assertion(request, context)
        return True


# oauthlib leaves most errors without a description; integrators deserve a sentence (RFC 6749 5.2).
_ERROR_DESCRIPTIONS = {
    "invalid_client": "Client authentication failed: unknown client, wrong secret, or inactive client.",
    "invalid_request": "The request is missing a required parameter or is malformed.",
    "invalid_scope": "The requested scope is unknown or not allowed for this client.",
    "unsupported_grant_type": "Only the client_credentials grant type is supported.",
    "unauthorized_client": "This client may not use this grant type.",
    "unsupported_token_type": "Only access tokens can be revoked.",
}


def _describe_error(response: HttpResponse) -> None:
    try:
        body = json.loads(response.content)
    except ValueError:
        return
    if not isinstance(body, dict) or "error" not in body:
        return
    # Errors oauthlib raises at the endpoint level (a query string on the token endpoint, a bad method) come
    # back from the toolkit without a Content-Type; as text/html the API's safety net replaced them with a
    # problem+json body, which no OAuth client reads.
    response["Content-Type"] = "application/json"
    if not body.get("error_description"):
        body["error_description"] = _ERROR_DESCRIPTIONS.get(body["error"], "The request was refused.")
        response.content = json.dumps(body).encode()


def _basic_credentials(request: HttpRequest) -> tuple[str, str] | None:
    """The (client_id, secret) of an HTTP Basic header (RFC 6749 2.3.1: each form-urlencoded); None when
    there is no Basic header; ValueError when there is one that cannot be read."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("The Basic credentials are not base64 of UTF-8 text.") from None
    client_id, _, secret = decoded.partition(":")
    return unquote_plus(client_id), unquote_plus(secret)


def _credentials_problem(request: HttpRequest) -> str | None:
    """Why a token or revocation request is malformed (RFC 6749 `invalid_request`), or None."""
    for name, values in request.POST.lists():
        if CONTROL_CHARACTERS.search(name) or any(CONTROL_CHARACTERS.search(value) for value in values):
            return "Parameters must not contain NUL or control characters."
    try:
        basic = _basic_credentials(request)
    except ValueError as exc:
        return str(exc)
    if "client_assertion" in request.POST or "client_assertion_type" in request.POST:
        if request.POST.get("client_assertion_type") != ASSERTION_TYPE:
            return f"client_assertion_type must be {ASSERTION_TYPE}."
        if not request.POST.get("client_assertion"):
            return "client_assertion is missing."
        if basic is not None or "client_secret" in request.POST:
            # RFC 6749 2.3: a client MUST NOT use more than one authentication method in a request.
            return "Send either a client assertion or the client secret, not both."
    if basic is None:
        return None
    if any(CONTROL_CHARACTERS.search(part) for part in basic):
        return "The Basic credentials must not contain NUL or control characters."
    if "client_id" in request.POST or "client_secret" in request.POST:
        # RFC 6749 2.3: a client MUST NOT use more than one authentication method in a request.
        return "Send the client credentials either by HTTP Basic or in the form, not both."
    return None


def _client_id_tried(request: HttpRequest) -> str:
    try:
        basic = _basic_credentials(request)
    except ValueError:
        basic = None
    tried = basic[0] if basic else request.POST.get("client_id", "")
    return (tried or assertion_client_id(request.POST.get("client_assertion", "")))[:100]


class _ClientControlledEndpoint:
    """Prepares the shared context before the toolkit runs, and finishes the response after."""

    issues_token = False

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        problem = _credentials_problem(request)
        if problem is not None:
            return oauth_error_response(400, "invalid_request", problem)
        context = TokenRequestContext(issues_token=self.issues_token)
        if "client_assertion" in request.POST:
            context.assertion = request.POST["client_assertion"]
            # Revocation too: the token endpoint's URL is the one audience a SMART client knows (discovery).
            context.audience = request.build_absolute_uri(reverse("auth-token"))
        request.META[TOKEN_CONTEXT_META_KEY] = context
        client_ip(request)  # resolved into request.META, where the validator reads it
        try:
            response = super().post(request, *args, **kwargs)  # type: ignore[misc]
        except Exception as exc:
            if not is_database_unavailable(exc):
                raise
            # PostgreSQL is restarting: an RFC 6749 body like every other answer of these endpoints (not the
            # API's problem+json), with Retry-After; the audit row is kept until the database is back.
            logger.warning("Database unavailable: answering 503 on %s", request.path)
            response = oauth_error_response(
                503, "temporarily_unavailable", "The service is temporarily unavailable; retry shortly."
            )
            response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        request_context(request).client = context.client
        request_context(request).client_authenticated = context.authenticated
        if context.rate_limit is not None:
            for name, value in context.rate_limit.headers().items():
                response[name] = value
        if response.status_code >= 400:
            _describe_error(response)
            tried = _client_id_tried(request)
            if tried:  # the audit row names who tried, even when no such client exists
                request_context(request).actor = f"client-id-tried:{tried}"
        response["Cache-Control"] = "no-store"
        response["Pragma"] = "no-cache"
        return response


@method_decorator(csrf_exempt, name="dispatch")
class TokenView(_ClientControlledEndpoint, oauth_views.TokenView):
    issues_token = True

    @method_decorator(sensitive_post_parameters("password", "client_secret", "client_assertion"))
    def authorization_flow_token_response(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The toolkit's, except that it reads the new token back (a SELECT) only to send `app_authorized`:
        here only when something listens to that signal."""
        if app_authorized.has_listeners(sender=self):
            return super().authorization_flow_token_response(request, *args, **kwargs)
        _url, headers, body, status = self.create_token_response(request)
        response = HttpResponse(content=body, status=status)
        for name, value in headers.items():
            response[name] = value
        return response

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200:
            token = json.loads(response.content).get("access_token", "")
            # The audit row names the issued token by the same checksum the toolkit stores.
            request_context(request).token_ref = hashlib.sha256(token.encode()).hexdigest()
        return response


@method_decorator(csrf_exempt, name="dispatch")
class RevokeTokenView(_ClientControlledEndpoint, oauth_views.RevokeTokenView):
    @method_decorator(sensitive_post_parameters("client_secret", "client_assertion"))
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().post(request, *args, **kwargs)
