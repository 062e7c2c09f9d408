"""Per-address rate limit of unauthenticated traffic (docs/api-rules.md §3, ANONYMOUS_RATE_LIMIT a minute).

Counted: requests under /api/ with no Authorization header, every 401 (an invalid, expired or revoked
token), and every token or revocation request that did not authenticate its client, so neither a flood of
garbage nor a guessing of client secrets goes faster than the limit. Not counted: the public schema, docs
and problem pages, and token requests with valid client credentials (those count against the client's own
token budget, integrations.clients.oauth).

An address over its limit gets 429 before its request is processed when it sends no credentials at all. A
request that carries credentials (a bearer token, or client credentials at the token endpoints) is
processed, and if they do not hold, its 401 becomes the 429: so valid credentials are never refused for
their address, and what a limited address can make us do per request is what any request does anyway
(one indexed read and a keyed hash or a signature check; a client's key set is not fetched on its behalf
more often than integrations.clients.jwks allows).
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase

from clinic.api import ratelimit
from clinic.api.context import request_context
from clinic.api.errors import oauth_error_response, problem_response
from clinic.api.network import client_ip
from clinic.api.paths import API_PREFIX, FHIR_PREFIX, OAUTH_PATHS, is_public_api_path


def _exempt(path: str) -> bool:
    return not path.startswith((API_PREFIX, FHIR_PREFIX)) or is_public_api_path(path)


def _key(request: HttpRequest) -> str:
    return f"anonymous:{client_ip(request) or 'unknown'}"


def _too_many(request: HttpRequest, decision: ratelimit.RateLimitDecision) -> HttpResponse:
    wait = max(decision.reset_seconds, 1)
    if request.path in OAUTH_PATHS:
        response = oauth_error_response(429, "rate_limited", f"Too many failed requests; retry in {wait} s.")
    else:
        response = problem_response(429, "rate_limited", f"Too many unauthenticated requests; retry in {wait} s.")
    response["Retry-After"] = str(wait)
    return response


class AnonymousRateLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if _exempt(request.path):
            return self.get_response(request)
        limit = settings.ANONYMOUS_RATE_LIMIT
        has_token = request.headers.get("Authorization", "").lower().startswith("bearer ")
        oauth = request.path in OAUTH_PATHS
        if not has_token and not oauth:
            decision = ratelimit.hit(_key(request), limit)
            request_context(request).rate_limit = decision  # the RateLimit-* headers
            return self.get_response(request) if decision.admitted else _too_many(request, decision)
        response = self.get_response(request)
        if oauth:
            # Counted: a request that did not authenticate its client and was refused for it (4xx; a 5xx is
            # ours). A request whose client authenticated is neither counted nor refused here.
            failed = not request_context(request).client_authenticated and 400 <= response.status_code < 500
        else:
            failed = response.status_code == 401
        if failed:
            decision = ratelimit.hit(_key(request), limit)
            if not decision.admitted:
                request_context(request).rate_limit = decision
                return _too_many(request, decision)
            if request_context(request).rate_limit is None and not response.has_header("RateLimit-Limit"):
                request_context(request).rate_limit = decision  # a client's own figures win
        return response
