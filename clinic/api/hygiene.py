"""Malformed requests are refused at the door, before a view, a parser or the OAuth toolkit reads them.

Each of these reached a 500 before (docs/api-rules.md §7): a multipart Content-Type without a boundary
(Django's form parser raises while the toolkit reads request.POST), an unknown charset, NUL bytes in a
path or query value (PostgreSQL refuses them in text), Unicode digits in a query value (Python's int()
and \\d accept them, PostgreSQL's checks do not), an oversized body, and too many form fields. The
refusal is a problem+json 4xx naming what was wrong, or an RFC 6749 error body on the token endpoints.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.multipartparser import MultiPartParserError
from django.utils.http import parse_header_parameters

from clinic.api.errors import oauth_error_response, problem_response
from clinic.api.paths import FHIR_PREFIX, OAUTH_PATHS
from clinic.text import CONTROL_CHARACTERS as _CONTROL
from clinic.text import has_non_ascii_digit
from integrations.fhir.outcome import FhirError, outcome_response

CHECKED_PREFIXES = ("/api/", "/fhir/")
# RFC 2046 section 5.1.1: 1-70 characters from this set, not ending in a space.
_BOUNDARY = re.compile(r"^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$")


@dataclass
class Refusal:
    status: int
    code: str
    detail: str
    errors: list[dict[str, Any]] = field(default_factory=list)


def _field_error(name: str, code: str, message: str) -> dict[str, Any]:
    return {"field": name, "code": code, "message": message}


def _check_path(request: HttpRequest) -> Refusal | None:
    if _CONTROL.search(request.path) or has_non_ascii_digit(request.path):
        return Refusal(
            400,
            "invalid_request",
            "The path contains a NUL or control character, or non-ASCII digits.",
            [_field_error("path", "invalid", "Only printable characters and ASCII digits 0-9.")],
        )
    return None


def _check_query(request: HttpRequest) -> Refusal | None:
    try:
        items = list(request.GET.lists())
    except TooManyFieldsSent:
        return Refusal(400, "invalid_request", "Too many query parameters.")
    errors = []
    for name, values in items:
        label = _CONTROL.sub("?", name)[:100]
        if _CONTROL.search(name) or any(_CONTROL.search(value) for value in values):
            errors.append(_field_error(label, "null_characters_not_allowed", "NUL and control characters are refused."))
        elif any(has_non_ascii_digit(value) for value in values):
            errors.append(_field_error(label, "invalid", "Digits must be ASCII 0-9."))
    if errors:
        return Refusal(400, "validation_error", "The request has invalid query parameters.", errors)
    return None


def _check_body_headers(request: HttpRequest) -> Refusal | None:
    raw_length = request.META.get("CONTENT_LENGTH") or ""
    if raw_length:
        if not raw_length.isascii() or not raw_length.isdigit():
            return Refusal(400, "invalid_request", "Content-Length is not a number.")
        if int(raw_length) > settings.MAX_REQUEST_BODY_BYTES:
            return Refusal(
                413,
                "payload_too_large",
                f"The body is larger than {settings.MAX_REQUEST_BODY_BYTES} bytes.",
            )
    content_type = request.META.get("CONTENT_TYPE") or ""
    if not content_type:
        return None
    media_type, params = parse_header_parameters(content_type)
    charset = params.get("charset")
    if charset is not None:
        use_utf8 = [_field_error("Content-Type", "invalid", "Use charset=utf-8 or leave the charset out.")]
        try:
            codec = codecs.lookup(charset)
        except LookupError:
            return Refusal(400, "invalid_request", "The Content-Type names an unknown charset.", use_utf8)
        if not getattr(codec, "_is_text_encoding", True):
            # hex, base64, zlib, bz2, uu, quopri, rot13: Python codecs, but not text encodings. The JSON parser
            # got bytes back (a 500), after inflating a zlib or bz2 body: 81 bytes of bz2 are 50 MB of JSON.
            return Refusal(
                400, "invalid_request", "The Content-Type names a charset that is not a text encoding.", use_utf8
            )
        if media_type == "application/x-www-form-urlencoded" and codec.name != "utf-8":
            # Django refuses any other charset for a form body (RFC 1866) by raising while the view reads it.
            return Refusal(400, "invalid_request", "A form-encoded body must be UTF-8.", use_utf8)
    if media_type.startswith("multipart/") and not _BOUNDARY.match(params.get("boundary") or ""):
        return Refusal(
            400,
            "invalid_request",
            "A multipart Content-Type needs a valid boundary.",
            [_field_error("Content-Type", "invalid", "Missing or invalid multipart boundary.")],
        )
    return None


def refusal_for(request: HttpRequest) -> Refusal | None:
    return _check_path(request) or _check_query(request) or _check_body_headers(request)


def refusal_for_exception(exc: BaseException) -> Refusal | None:
    """Django's own refusals of a body it was asked to read (while the toolkit reads request.POST)."""
    if isinstance(exc, RequestDataTooBig):
        return Refusal(413, "payload_too_large", f"The body is larger than {settings.MAX_REQUEST_BODY_BYTES} bytes.")
    if isinstance(exc, TooManyFieldsSent):
        return Refusal(400, "invalid_request", "Too many form fields.")
    if isinstance(exc, MultiPartParserError | SuspiciousOperation | BadRequest | UnicodeDecodeError):
        return Refusal(400, "invalid_request", "The request body cannot be read as sent.")
    return None


def refusal_response(request: HttpRequest, refusal: Refusal) -> HttpResponse:
    if request.path in OAUTH_PATHS:
        return oauth_error_response(refusal.status, "invalid_request", refusal.detail)
    if request.path.startswith(FHIR_PREFIX):  # FHIR errors are OperationOutcomes
        fields = [error["field"] for error in refusal.errors or [] if error.get("field")]
        return outcome_response(FhirError(refusal.status, refusal.detail, expression=fields or None))
    return problem_response(refusal.status, refusal.code, refusal.detail, errors=refusal.errors or None)


class RequestHygieneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request.path.startswith(CHECKED_PREFIXES):
            refusal = refusal_for(request)
            if refusal is not None:
                return refusal_response(request, refusal)
            if request.encoding and codecs.lookup(request.encoding).name == "utf-8":
                # An alias (utf8, UTF_8): the body is read as the UTF-8 it is; Django's form parser takes the
                # literal name "utf-8" only and refused "charset=utf8" while the token endpoint read it (a 500).
                request.encoding = "utf-8"
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith(CHECKED_PREFIXES):
            return None
        refusal = refusal_for_exception(exception)
        return refusal_response(request, refusal) if refusal is not None else None
