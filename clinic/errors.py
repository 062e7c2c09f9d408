"""Domain errors raised by services; the API layer turns them into RFC 9457 problem responses.

Each class that declares its own `code` declares a problem kind: its status, title and the description
its `/api/v1/problems/{code}` page shows, once, here or in its app's errors module. The API's problem
registry (clinic.api.errors.PROBLEM_KINDS) is built from these classes. A second class with the same
code is refused when it is defined.

The generic kinds live here; each domain app's own are in `<app>/errors.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

_CLASSES: dict[str, type[DomainError]] = {}


class DomainError(Exception):
    """A refusal the caller can act on. `code` is the stable machine string clients switch on.

    A subclass with a code of its own declares `description` too, unless the API layer declares that
    kind itself (unknown_parameter, idempotency_key_reused: see clinic.api.errors)."""

    status: ClassVar[int] = 400
    code = "invalid_request"
    title: ClassVar[str] = "Invalid request"
    description: ClassVar[str | None] = "The request cannot be processed as sent."

    def __init__(self, detail: str, *, code: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        self.extra = extra

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            _register(cls)

    @classmethod
    def own_description(cls) -> str | None:
        """The description this class declares itself (an inherited one describes another kind)."""
        description = cls.__dict__.get("description")
        return description if isinstance(description, str) else None


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _register(cls: type[DomainError]) -> None:
    known = _CLASSES.get(cls.code)
    # The same class defined again (a module reloaded) replaces itself; any other class is a second
    # declaration of the kind, which would silently answer with one of the two titles.
    if known is not None and _name(known) != _name(cls):
        raise TypeError(f"Problem code {cls.code!r} is declared twice: by {_name(known)} and by {_name(cls)}.")
    _CLASSES[cls.code] = cls


def problem_classes() -> Mapping[str, type[DomainError]]:
    """Every domain error class with a code of its own, by code."""
    return MappingProxyType(_CLASSES)


_register(DomainError)


class NotFound(DomainError):
    status = 404
    code = "not_found"
    title = "Not found"
    description = "No such resource, or not visible to this client."


class Conflict(DomainError):
    """409: the request is valid but conflicts with the current state (duplicate, taken slot...)."""

    status = 409
    code = "conflict"
    title = "Conflict"
    description = "The request conflicts with the current state."


class InvalidState(Conflict):
    """409: the operation is not allowed from the record's current status (a transition table's refusal)."""

    code = "invalid_state"
    title = "Invalid state"
    description = "The operation is not allowed in the resource's current status; see current_status."


class RecordNotDeletable(Conflict):
    """409: a clinical or financial record was about to be deleted (clinic.records.deletes_refused)."""

    code = "record_not_deletable"
    title = "Records are never deleted"
    description = (
        "Clinical and financial records are never deleted: deactivate or merge the patient, or mark the record "
        "entered in error."
    )


class FieldError(DomainError):
    """400 naming one or more fields, for rules a service checks against the database."""

    status = 400
    code = "validation_error"
    title = "Invalid input"
    description = "One or more fields are invalid; see `errors`."

    def __init__(self, errors: dict[str, str], *, detail: str = "The request has invalid fields.") -> None:
        super().__init__(detail)
        self.errors = errors
