"""Idempotency-Key handling for POST, PATCH and DELETE, stored in PostgreSQL per client and key for 24 hours.

1. The key is reserved, the handler runs and its response is stored in ONE transaction (docs/api-rules.md §4):
   the reservation exists only if the domain change commits. Whatever breaks the request (PostgreSQL,
   PgBouncer, the network, a killed worker), PostgreSQL rolls the transaction back, so nothing outlives
   it and the retry is executed, not refused. (The previous release reserved in a transaction of its
   own and needed the lost connection to clean up: after a PgBouncer restart keys stayed "in progress"
   for IDEMPOTENCY_STALE_AFTER_SECONDS.)
2. A concurrent request with the same key blocks on the first one's uncommitted unique-index entry, for
   at most LOCK_WAIT: if the first finishes by then it gets the replay (or 422, or executes if the first
   rolled back); otherwise 409 `idempotency_key_in_use` with Retry-After.
3. Same key, same request: the stored status and body are replayed with `Idempotent-Replayed: true`.
   Same key, different request: 422 `idempotency_key_reused`. 5xx outcomes are not stored (the
   reservation rolls back with them). A record left "in progress" by the previous release is still
   taken over after IDEMPOTENCY_STALE_AFTER_SECONDS, and answered 409 with Retry-After until then.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.http import HttpResponse
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic import crypto
from clinic.api.errors import KeyInUse, KeyReused
from clinic.api.renderers import dumps
from integrations.models import ApiClient, IdempotencyRecord

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_KEPT_HEADERS = ("Location",)
# How long a request waits for a concurrent one with the same key before answering 409: long enough for
# a typical write to finish (the duplicate then gets its replay), short enough not to hold a web worker.
LOCK_WAIT = timedelta(seconds=2)
LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock_timeout
_IN_USE = "A request with this Idempotency-Key is still in progress; retry later."
_IN_USE_RETRY_AFTER_SECONDS = 1
_STORED_FIELDS = [
    "fingerprint",
    "state",
    "response_status",
    "response_body",
    "response_headers",
    "created_at",
    "updated_at",
]


class ShownOnceResponse(Response):
    """A response whose body holds a secret shown once (a new webhook signing secret). Its idempotency record
    stores `replay_data`, the same body with the secret masked: no stored response holds a secret
    (docs/api-rules.md §7), and a replay does not show it a second time."""

    def __init__(self, data: Any, *, replay_data: Any, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.replay_data = replay_data


def _stored_data(response: Response) -> Any:
    return response.replay_data if isinstance(response, ShownOnceResponse) else response.data


def validate_key(key: str) -> str:
    if not 1 <= len(key) <= 255 or not key.isascii() or not key.isprintable():
        raise serializers.ValidationError(
            {HEADER: [serializers.ErrorDetail("Must be 1-255 printable ASCII characters.", code="invalid")]}
        )
    return key


def fingerprint(request: Request) -> str:
    """Method, path with its query (a DELETE's reason travels there) and the parsed body re-serialised with
    sorted keys: spacing and key order do not matter. Without a query the path is the path alone, as before
    the query was part of it, so keys recorded then still match."""
    body = dumps(request.data, sort_keys=True)
    digest = hashlib.sha256()
    for part in (request.method or "", request.get_full_path(), body):
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _seal(body: str) -> str:
    """Stored responses hold whole patient profiles for 24 hours: encrypted at rest (docs/api-rules.md §7)."""
    return crypto.encrypt(body) if body else ""


def _unseal(stored: str) -> str:
    # A record written before encryption (kept at most 24 hours) is JSON; a Fernet token never starts so.
    return crypto.decrypt(stored) if stored and stored[0] not in "[{" else stored


def _replay(record: IdempotencyRecord) -> HttpResponse:
    response = HttpResponse(
        _unseal(record.response_body).encode(),
        status=record.response_status,
        content_type=record.response_headers.get("Content-Type", "application/json"),
    )
    for name in _KEPT_HEADERS:
        if name in record.response_headers:
            response[name] = record.response_headers[name]
    response[REPLAYED_HEADER] = "true"
    return response


def _reserve(client: ApiClient, key: str, digest: str) -> IdempotencyRecord | HttpResponse:
    """Own the key (returns the record) or answer from it (returns the replay); raises 409/422.

    Runs inside the caller's transaction: the row it inserts exists for others only once that transaction
    commits, with the handler's change and the stored response. Its waits (on a concurrent request's
    uncommitted row, or on a record another request is taking over) are bounded by LOCK_WAIT; the domain's
    own statements afterwards keep the session's lock_timeout."""
    now = timezone.now()
    with connection.cursor() as cursor:
        # Transaction-local (set_config's third argument): through PgBouncer in transaction mode a session
        # setting would leak to whichever client the server connection serves next.
        cursor.execute(
            "SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
            [f"{round(LOCK_WAIT.total_seconds() * 1000)}ms"],
        )
        (previous_lock_timeout, _) = cursor.fetchone() or ("0", None)
        try:
            cursor.execute(
                f"INSERT INTO {IdempotencyRecord._meta.db_table} "  # noqa: S608 - table name is ours
                "(client_id, key, fingerprint, state, response_body, response_headers, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, '', '{}', %s, %s) ON CONFLICT (client_id, key) DO NOTHING RETURNING id",
                [client.pk, key, digest, IdempotencyRecord.State.IN_PROGRESS, now, now],
            )
            inserted = cursor.fetchone()
            if inserted:  # ours, and invisible to others until we commit: nothing to read or lock
                record = IdempotencyRecord(
                    pk=inserted[0],
                    client=client,
                    key=key,
                    fingerprint=digest,
                    state=IdempotencyRecord.State.IN_PROGRESS,
                    created_at=now,
                    updated_at=now,
                )
            else:
                record = IdempotencyRecord.objects.select_for_update().get(client=client, key=key)
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                raise
            # Another request with this key has not finished yet (its row is not committed).
            raise KeyInUse(_IN_USE, retry_after=_IN_USE_RETRY_AFTER_SECONDS) from None
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [previous_lock_timeout])
    if inserted:
        return record
    expired = record.created_at < now - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    stale_at = record.updated_at + timedelta(seconds=settings.IDEMPOTENCY_STALE_AFTER_SECONDS)
    in_progress = record.state == IdempotencyRecord.State.IN_PROGRESS
    if expired or (in_progress and stale_at < now and record.fingerprint == digest):
        record.fingerprint, record.state, record.created_at, record.updated_at = (
            digest,
            IdempotencyRecord.State.IN_PROGRESS,
            now,
            now,
        )
        record.response_status, record.response_body, record.response_headers = None, "", {}
        record.save()
        return record
    if record.fingerprint != digest:
        raise KeyReused("This Idempotency-Key was already used with a different request.")
    if in_progress:
        # Only a reservation committed by the previous release (which reserved in a transaction of its
        # own) is ever seen in progress: it is taken over once stale, so that is when to come back.
        wait = max(math.ceil((stale_at - now).total_seconds()), 1)
        raise KeyInUse(_IN_USE, retry_after=wait)
    return _replay(record)


def execute(*, client: ApiClient, key: str, request: Request, handler: Callable[[], Response]) -> HttpResponse:
    """Run `handler` at most once per (client, key); `handler` returns a response and never raises."""
    validate_key(key)
    digest = fingerprint(request)
    with transaction.atomic():
        reserved = _reserve(client, key, digest)
        if isinstance(reserved, HttpResponse):
            return reserved
        record = reserved
        response = handler()
        if response.status_code >= 500:
            # Nothing is stored and the reservation goes with the rest: the client may retry.
            transaction.set_rollback(True)
            return response
        record.state = IdempotencyRecord.State.COMPLETED
        record.response_status = response.status_code
        stored_data = _stored_data(response)
        record.response_body = _seal(dumps(stored_data).decode() if stored_data is not None else "")
        record.response_headers = {
            "Content-Type": response.content_type or "application/json",
            **{name: response[name] for name in _KEPT_HEADERS if response.has_header(name)},
        }
        record.updated_at = timezone.now()
        # An UPDATE of the row reserved (or taken over) above, in this transaction.
        record.save(update_fields=_STORED_FIELDS)
    return response


def purge_expired() -> int:
    cutoff = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted
