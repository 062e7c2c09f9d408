"""Request ids on every response, and problem+json for any error under /api/ that escaped DRF."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBase

from clinic.api.context import request_context
from clinic.api.errors import (
    PROBLEM_KINDS,
    internal_error_response,
    is_database_unavailable,
    plain_service_unavailable_response,
    problem_response,
    service_unavailable_response,
)
from clinic.api.request_id import HEADER, accept_or_generate, current_client_id, current_request_id, current_route

logger = logging.getLogger("clinic.api")
API_PREFIX = "/api/"


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        request_id = accept_or_generate(request.headers.get(HEADER))
        request_context(request).request_id = request_id
        token = current_request_id.set(request_id)
        client_token, route_token = current_client_id.set("-"), current_route.set("-")
        try:
            response = self.get_response(request)
        finally:
            current_request_id.reset(token)
            current_client_id.reset(client_token)
            current_route.reset(route_token)
        response[HEADER] = request_id
        return response


class ApiErrorMiddleware:
    """A safety net for /api/: Django-level errors (unhandled exceptions outside DRF views, 405 from
    plain views, CSRF or host refusals) become problem responses instead of HTML pages."""

    _CODES = {
        400: "invalid_request",
        401: "not_authenticated",
        403: "permission_denied",
        404: "not_found",
        405: "method_not_allowed",
        406: "not_acceptable",
        415: "unsupported_media_type",
        429: "rate_limited",
    }

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if (
            request.path.startswith(API_PREFIX)
            and response.status_code >= 400
            and "json" not in response.get("Content-Type", "")
        ):
            code = self._CODES.get(
                response.status_code, "invalid_request" if response.status_code < 500 else "internal_error"
            )
            replacement = problem_response(
                response.status_code,
                code,
                None if response.status_code >= 500 else PROBLEM_KINDS[code].description,
            )
            for header in ("Allow", "WWW-Authenticate", "Retry-After"):
                if response.has_header(header):
                    replacement[header] = response[header]
            return replacement
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX):
            if is_database_unavailable(exception):
                return plain_service_unavailable_response()
            return None
        if is_database_unavailable(exception):
            return service_unavailable_response()
        logger.exception("Unhandled exception", exc_info=exception)
        return internal_error_response()
