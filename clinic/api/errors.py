"""RFC 9457 problem details for every error the API produces.

One registry of problem kinds (code -> status, title, description) feeds the responses, the
`/api/v1/problems/{code}` pages that the `type` URIs point at, and the OpenAPI description.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from django import db
from django.core.exceptions import NON_FIELD_ERRORS, ImproperlyConfigured
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response

from clinic import crypto
from clinic.api.context import request_context
from clinic.api.renderers import JSONRenderer, dumps
from clinic.api.request_id import current_request_id
from clinic.errors import DomainError, FieldError, problem_classes

logger = logging.getLogger("clinic.api")
PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_PREFIX = "/api/v1/problems/"


@dataclass(frozen=True)
class ProblemKind:
    status: int
    title: str
    description: str


# The kinds the API layer itself produces (DRF, authentication, client controls, idempotency). Every other
# kind is declared by the domain error class that raises it (clinic.errors and each app's errors module).
API_KINDS: dict[str, ProblemKind] = {
    "parse_error": ProblemKind(400, "Malformed request body", "The body is not valid JSON."),
    "not_authenticated": ProblemKind(401, "Authentication required", "No bearer token was sent."),
    "invalid_token": ProblemKind(401, "Invalid token", "The bearer token is invalid, expired or revoked."),
    "insufficient_scope": ProblemKind(403, "Insufficient scope", "The token lacks the scope the operation needs."),
    "ip_not_allowed": ProblemKind(403, "Address not allowed", "The client may not call from this IP address."),
    "permission_denied": ProblemKind(403, "Forbidden", "The client may not perform this operation."),
    "method_not_allowed": ProblemKind(405, "Method not allowed", "See the Allow header."),
    "not_acceptable": ProblemKind(406, "Not acceptable", "The API produces application/json only."),
    "idempotency_key_in_use": ProblemKind(
        409,
        "Idempotency key in use",
        "A request with this Idempotency-Key is still being processed; retry after Retry-After.",
    ),
    "payload_too_large": ProblemKind(413, "Payload too large", "The body exceeds MAX_REQUEST_BODY_BYTES."),
    "unsupported_media_type": ProblemKind(415, "Unsupported media type", "Send application/json."),
    "rate_limited": ProblemKind(429, "Too many requests", "The client exceeded its rate limit; see Retry-After."),
    "internal_error": ProblemKind(500, "Internal server error", "Report the request_id to support."),
    "encryption_key_mismatch": ProblemKind(
        503,
        "Service unavailable",
        "A stored value cannot be decrypted with the service's FIELD_ENCRYPTION_KEY (a configuration fault: a "
        "restore or a key rotation under way); retry after Retry-After.",
    ),
    "service_unavailable": ProblemKind(
        503,
        "Service unavailable",
        "The database is briefly unreachable or out of a resource (a restart, a full disk, no free "
        "connection); retry after Retry-After.",
    ),
}


def problem_kinds_build(
    api_kinds: Mapping[str, ProblemKind], classes: Mapping[str, type[DomainError]]
) -> dict[str, ProblemKind]:
    """Every kind, in status then code order. Raises ImproperlyConfigured when a kind is declared twice
    (a class describing a kind the API declares) or disagrees with the API's declaration, or when a class
    neither describes its kind nor raises one the API declares."""
    kinds = dict(api_kinds)
    for code, cls in classes.items():
        description, declared = cls.own_description(), api_kinds.get(code)
        if declared is None and description is None:
            raise ImproperlyConfigured(f"{cls.__qualname__} declares code {code!r} but no description.")
        if declared is not None and description is not None:
            raise ImproperlyConfigured(f"Problem kind {code!r} is declared twice: by {cls.__qualname__} and the API.")
        if declared is not None and (declared.status, declared.title) != (cls.status, cls.title):
            raise ImproperlyConfigured(f"{cls.__qualname__} disagrees with the API's {code!r}: {declared}.")
        if description is not None:
            kinds[code] = ProblemKind(cls.status, cls.title, description)
    return dict(sorted(kinds.items(), key=lambda item: (item[1].status, item[0])))


# The API's own kinds that are raised as domain errors: defined here, with the registry, so they are
# declared however the registry is first read.
class UnknownParameter(DomainError):
    status = 400
    code = "unknown_parameter"
    title = "Unknown query parameter"
    description = "The operation does not take this query parameter; see `errors`."


class KeyReused(DomainError):
    status = 422
    code = "idempotency_key_reused"
    title = "Idempotency key reused"
    description = "This Idempotency-Key was used with a different request body."


class KeyInUse(DomainError):
    """409 with Retry-After: another request with this Idempotency-Key has not finished (clinic.api.idempotency)."""

    status = 409
    code = "idempotency_key_in_use"
    title = "Idempotency key in use"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail)
        self.headers = {"Retry-After": str(retry_after)}


class ProblemRegistry(Mapping[str, ProblemKind]):
    """code -> ProblemKind, built when read from the API's kinds and the domain error classes defined by
    then (every app imports its errors module when Django starts: see its AppConfig.ready)."""

    def __init__(self, api_kinds: Mapping[str, ProblemKind]) -> None:
        self._api_kinds = api_kinds
        self._built: dict[str, ProblemKind] = {}
        self._built_from: tuple[type[DomainError], ...] = ()

    def _kinds(self) -> dict[str, ProblemKind]:
        classes = problem_classes()
        if tuple(classes.values()) != self._built_from:  # a class defined since: build again
            self._built = problem_kinds_build(self._api_kinds, classes)
            self._built_from = tuple(classes.values())
        return self._built

    def __getitem__(self, code: str) -> ProblemKind:
        return self._kinds()[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds())

    def __len__(self) -> int:
        return len(self._kinds())


PROBLEM_KINDS = ProblemRegistry(API_KINDS)


def problem_body(
    status_code: int,
    code: str,
    detail: str | None = None,
    *,
    title: str | None = None,
    errors: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    kind = PROBLEM_KINDS.get(code)
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_PREFIX + code,
        "title": title or (kind.title if kind else "Error"),
        "status": status_code,
    }
    if detail:
        body["detail"] = detail
    body["code"] = code
    body["request_id"] = current_request_id.get()
    if status_code == 400:
        body["errors"] = errors or []
    body.update(extra)
    return body


def oauth_error_response(status_code: int, error: str, description: str) -> HttpResponse:
    """An RFC 6749 section 5.2 error body, as the token and revocation endpoints answer (never cached)."""
    response = HttpResponse(
        json.dumps({"error": error, "error_description": description}),
        status=status_code,
        content_type="application/json",
    )
    response["Cache-Control"] = "no-store"
    return response


def problem_response(status_code: int, code: str, detail: str | None = None, **kwargs: Any) -> HttpResponse:
    """A plain Django response, for code outside DRF views (middleware, token endpoint wrappers)."""
    return HttpResponse(
        dumps(problem_body(status_code, code, detail, **kwargs)),
        status=status_code,
        content_type=PROBLEM_MEDIA_TYPE,
    )


def _flatten(detail: Any, prefix: str = "") -> Iterator[dict[str, Any]]:
    """DRF's nested error detail as a flat list naming each field by dotted path (address.pincode)."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = "" if key in ("non_field_errors", "__all__") else str(key)
            yield from _flatten(value, f"{prefix}.{name}" if prefix and name else (name or prefix))
    elif isinstance(detail, list):
        if all(isinstance(item, exceptions.ErrorDetail | str) for item in detail):
            for item in detail:
                yield {
                    "field": prefix or None,
                    "code": getattr(item, "code", "invalid"),
                    "message": str(item),
                }
        else:  # a list of nested objects: insurance.0.provider
            for index, item in enumerate(detail):
                if item:
                    yield from _flatten(item, f"{prefix}.{index}" if prefix else str(index))
    else:
        yield {"field": prefix or None, "code": getattr(detail, "code", "invalid"), "message": str(detail)}


def validation_errors(detail: Any) -> list[dict[str, Any]]:
    return list(_flatten(detail))


def django_validation_errors(exc: DjangoValidationError) -> list[dict[str, Any]]:
    """Django's ValidationError as the same flat list: one entry per message, naming its field (None for
    an error of the whole object)."""
    by_field = exc.error_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.error_list}
    return [
        {"field": None if field == NON_FIELD_ERRORS else field, "code": error.code or "invalid", "message": message}
        for field, errors in by_field.items()
        for error in errors
        for message in error.messages
    ]


class ProblemResponse(Response):
    """Rendered as JSON whatever renderer the view negotiated: the schema view's YAML renderer or the
    docs page's HTML template would otherwise write the problem in their own format, under a
    problem+json label."""

    @property
    def rendered_content(self) -> Any:
        self.accepted_renderer = JSONRenderer()
        return super().rendered_content


def _problem(status_code: int, code: str, detail: str | None, headers: dict[str, str] | None = None, **kw: Any):
    return ProblemResponse(
        problem_body(status_code, code, detail, **kw),
        status=status_code,
        headers=headers,
        content_type=PROBLEM_MEDIA_TYPE,
    )


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception becomes a problem response (never HTML, never a trace)."""
    if isinstance(exc, FieldError):
        errors = [{"field": field, "code": "invalid", "message": message} for field, message in exc.errors.items()]
        return _problem(400, exc.code, exc.detail, errors=errors)
    if isinstance(exc, DjangoValidationError):  # a model's full_clean() or validator in a service
        return _problem(
            400, "validation_error", "The request has invalid fields.", errors=django_validation_errors(exc)
        )
    if isinstance(exc, DomainError):
        # One title per problem type (RFC 9457 3.1.3), the one its /problems/ page shows: a generic class
        # raised with a specific code, Conflict(code="idempotency_key_in_use"), must not say just "Conflict".
        kind = PROBLEM_KINDS.get(exc.code)
        title = kind.title if kind else exc.title
        return _problem(exc.status, exc.code, exc.detail, getattr(exc, "headers", None), title=title, **exc.extra)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()

    if isinstance(exc, exceptions.APIException):
        headers: dict[str, str] = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = cast(Any, exc).auth_header
        if isinstance(exc, exceptions.ValidationError):
            return _problem(
                400,
                "validation_error",
                "The request has invalid fields.",
                errors=validation_errors(exc.detail),
            )
        if isinstance(exc, exceptions.ParseError):
            message = str(exc.detail)
            return _problem(
                400,
                "parse_error",
                message,
                errors=[{"field": None, "code": "parse_error", "message": message}],
            )
        if isinstance(exc, exceptions.Throttled):
            wait = max(int(getattr(exc, "wait", None) or 1), 1)
            headers["Retry-After"] = str(wait)
            return _problem(429, "rate_limited", f"Rate limit exceeded; retry in {wait} s.", headers)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            # The toolkit's verdict, recorded by the authentication: empty when no token was sent at all.
            drf_request = context.get("request")
            oauth_error = request_context(drf_request).oauth2_error if drf_request is not None else {}
            code = "invalid_token" if oauth_error else "not_authenticated"
            detail = oauth_error.get("error_description") or str(exc.detail)
            status_code = status.HTTP_401_UNAUTHORIZED if headers else status.HTTP_403_FORBIDDEN
            return _problem(status_code, code, str(detail), headers)
        code = getattr(exc, "problem_code", None) or {
            status.HTTP_403_FORBIDDEN: "permission_denied",
            status.HTTP_404_NOT_FOUND: "not_found",
            status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
            status.HTTP_406_NOT_ACCEPTABLE: "not_acceptable",
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
        }.get(exc.status_code, str(exc.default_code))
        headers.update(getattr(exc, "extra_headers", {}))
        return _problem(exc.status_code, code, str(exc.detail), headers)

    if isinstance(exc, crypto.DecryptionError):
        # A configuration fault, not the request's (docs/backup-and-recovery.md section 7): a 503 the client
        # retries, never a 500; what it tried to read (an idempotent replay's stored response) stays untouched.
        logger.error("A stored value cannot be decrypted with FIELD_ENCRYPTION_KEY: answering 503")
        return _problem(
            503,
            "encryption_key_mismatch",
            "The service cannot read stored data with its configured key; retry later.",
            {"Retry-After": str(ENCRYPTION_RETRY_AFTER_SECONDS)},
        )
    if is_database_unavailable(exc):
        logger.warning("Database unavailable: answering 503")
        return _problem(
            503,
            "service_unavailable",
            "The database is unavailable; retry shortly.",
            {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)},
        )
    logger.exception("Unhandled exception in API view", exc_info=exc)
    return _problem(500, "internal_error", None)


# How long a caller should wait when PostgreSQL is unreachable: about one restart of the server.
DATABASE_RETRY_AFTER_SECONDS = 5
# ... and when the configured key cannot read stored data: an operator's fix (a roll with the right key).
ENCRYPTION_RETRY_AFTER_SECONDS = 30


# SQLSTATEs that say PostgreSQL (or PgBouncer in front of it) cannot serve right now, whatever the statement:
# class 08 connection exception (PgBouncer reports its own failures as 08P01: "server conn crashed?",
# "no more connections allowed", "query_wait_timeout", "pgbouncer cannot connect to server"), class 53
# insufficient resources (53100 disk full, 53200 out of memory, 53300 too many connections, 53400
# configuration limit exceeded), 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now; 57P04/05
# are a dropped database and an idle session timeout) and class 58 system errors (58030 could not write a
# file: an I/O error). Not deadlocks, serialization failures, lock or statement timeouts: those are
# OperationalErrors of one statement, handled (or reported) where they happen.
_UNAVAILABLE_CLASSES = ("08", "53", "58")
_UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03"})


def unavailable_sqlstate(sqlstate: str | None) -> bool:
    return sqlstate is not None and (sqlstate.startswith(_UNAVAILABLE_CLASSES) or sqlstate in _UNAVAILABLE_STATES)


def is_database_unavailable(exc: BaseException) -> bool:
    """PostgreSQL unreachable, restarting or out of a resource: a 503 with Retry-After, never a 500.

    InterfaceError (the connection is closed), an OperationalError without an SQLSTATE (the connection
    failed or broke under the query: psycopg raises those client-side) or with one of the states above."""
    if isinstance(exc, db.InterfaceError):
        return True
    if not isinstance(exc, db.OperationalError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return sqlstate is None or unavailable_sqlstate(sqlstate)


def plain_service_unavailable_response() -> HttpResponse:
    """The admin and every other page: a 503 a balancer and a browser understand, never a 500."""
    logger.warning("Database unavailable: answering 503")
    response = HttpResponse(
        "Service unavailable: the database is briefly unreachable; retry shortly.\n",
        status=503,
        content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


def service_unavailable_response() -> HttpResponse:
    logger.warning("Database unavailable: answering 503")
    response = problem_response(
        503, "service_unavailable", "The database is unavailable; retry shortly.", title="Service unavailable"
    )
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


@csrf_exempt  # an API path takes no cookies: without this, a POST to an unknown path was a CSRF 403
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    return problem_response(404, "not_found", f"No API endpoint at {request.path}.")


def internal_error_response() -> HttpResponse:
    return problem_response(500, "internal_error", None)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return api_not_found(request)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Http404())


def handler500(request: HttpRequest) -> HttpResponse:
    # Django calls this while handling the exception: one raised outside any view (a middleware writing
    # the session during a full disk, say) is a database outage too, and answered as one.
    if is_database_unavailable(sys.exc_info()[1] or Exception()):
        if request.path.startswith("/api/"):
            return service_unavailable_response()
        return plain_service_unavailable_response()
    if request.path.startswith("/api/"):
        return internal_error_response()
    from django.views.defaults import server_error

    return server_error(request)
