"""Domain errors raised by services; the API layer turns them into RFC 9457 problem responses."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """A refusal the caller can act on. `code` is the stable machine string clients switch on."""

    status = 400
    code = "invalid_request"
    title = "Invalid request"

    def __init__(self, detail: str, *, code: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        self.extra = extra


class NotFound(DomainError):
    status = 404
    code = "not_found"
    title = "Not found"


class Conflict(DomainError):
    """409: the request is valid but conflicts with the current state (duplicate, taken slot...)."""

    status = 409
    code = "conflict"
    title = "Conflict"


class FieldError(DomainError):
    """400 naming one or more fields, for rules a service checks against the database."""

    status = 400
    code = "validation_error"
    title = "Invalid input"

    def __init__(self, errors: dict[str, str], *, detail: str = "The request has invalid fields.") -> None:
        super().__init__(detail)
        self.errors = errors
