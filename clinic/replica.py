"""The optional read replica (docs/operations.md §1): with DATABASE_REPLICA_URL set, the reads that tolerate a
little lag (lists, patient search, the billing summary, FHIR search) go to the `replica` database alias and
everything else to the primary (`default`).

The decision is per request, taken when it starts (the `request_started` signal, so no middleware is
involved): a GET of one of REPLICA_ROUTES may read the replica. Even then a read goes to the primary when
- the model belongs to `integrations` (API clients, tokens, idempotency keys, audit: authentication must
  see a token issued a moment ago, which the replica may not have yet);
- a transaction is open on the primary (its reads must see its own writes and locks);
- the request has written or opened a transaction before: from then on it is pinned to the primary for
  its remainder, so a write followed by a read of the same object never reads the stale copy.
Without DATABASE_REPLICA_URL there is no `replica` alias and every query goes to the primary.
"""

from __future__ import annotations

import contextvars
from typing import Any

from django.core.signals import request_finished, request_started
from django.db import connections
from django.urls import Resolver404, resolve

REPLICA = "replica"
PRIMARY = "default"

# GET routes (URL pattern names) whose answers may lag the primary by the replica's replay delay.
REPLICA_ROUTES = frozenset(
    {
        "appointment-list",
        "billing-summary",
        "branch-list",
        "dispense-list",
        "doctor-list",
        "drug-list",
        "invoice-list",
        "laborder-list",
        "labtest-list",
        "patient-list",  # the list and the patient search (?search=)
        "prescription-list",
        "stock-list",
    }
)
# FHIR searches are named fhir-<Type>-search; Slot availability is left out: a lagging replica would
# offer a slot just taken.
FHIR_SEARCH_EXCLUDED = frozenset({"fhir-Slot-search"})
PRIMARY_ONLY_APPS = frozenset(
    {"integrations", "oauth2_provider", "auth", "sessions", "admin", "contenttypes", "axes", "otp_totp"}
)

_replica_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar("replica_allowed", default=False)
_pinned: contextvars.ContextVar[bool] = contextvars.ContextVar("replica_pinned", default=False)


def configured() -> bool:
    return REPLICA in connections.settings


def route_reads_replica(route: str | None) -> bool:
    if not route:
        return False
    if route in REPLICA_ROUTES:
        return True
    return route.startswith("fhir-") and route.endswith("-search") and route not in FHIR_SEARCH_EXCLUDED


def _route_of(path: str) -> str | None:
    try:
        return resolve(path).url_name
    except Resolver404:
        return None


def begin_request(method: str, path: str) -> None:
    """Called as a request starts: may it read the replica? Unpinned in any case."""
    _pinned.set(False)
    _replica_allowed.set(configured() and method in ("GET", "HEAD") and route_reads_replica(_route_of(path)))


def end_request() -> None:
    _pinned.set(False)
    _replica_allowed.set(False)


def pin_to_primary() -> None:
    """The rest of this request reads the primary (also for code that writes outside the ORM)."""
    _pinned.set(True)


def _on_request_started(sender: Any, environ: dict[str, Any] | None = None, **kwargs: Any) -> None:
    environ = environ or {}
    begin_request(environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", ""))


def _on_request_finished(sender: Any, **kwargs: Any) -> None:
    end_request()


request_started.connect(_on_request_started, dispatch_uid="clinic.replica.started")
request_finished.connect(_on_request_finished, dispatch_uid="clinic.replica.finished")


class ReplicaRouter:
    """DATABASE_ROUTERS entry. Returns None (Django's default: `default`) whenever the primary is meant."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if not _replica_allowed.get() or _pinned.get():
            return None
        if connections[PRIMARY].in_atomic_block:
            _pinned.set(True)  # a transaction happened in this request: no replica read after it either
            return None
        if model._meta.app_label in PRIMARY_ONLY_APPS:
            return None
        instance = hints.get("instance")  # a related manager's owner: an API client's branches are access control
        if instance is not None and instance._meta.app_label in PRIMARY_ONLY_APPS:
            return None
        return REPLICA

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        _pinned.set(True)
        return None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        return True  # the replica is a copy of the primary: objects from either may be related

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return db != REPLICA  # only the primary is migrated; streaming replication copies the schema
