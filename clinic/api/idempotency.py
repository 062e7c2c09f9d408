"""Idempotency-Key handling for POST, PATCH and DELETE, stored in PostgreSQL per client and key for 24 hours.

1. The key is reserved in its own committed transaction (INSERT ... ON CONFLICT DO NOTHING), so a
   concurrent request with the same key sees it at once and gets 409 `idempotency_key_in_use`.
2. The handler and the recording of its outcome run in one transaction: if the domain change commits,
   so does the stored response; a retry can never execute it twice.
3. Same key, same request: the stored status and body are replayed with `Idempotent-Replayed: true`.
   Same key, different request: 422 `idempotency_key_reused`. 5xx outcomes are not stored (the key is
   released, so the client may retry), and a reservation abandoned by a crashed worker expires after
   IDEMPOTENCY_STALE_AFTER_SECONDS.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.http import HttpResponse
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic import crypto
from clinic.api.errors import KeyReused
from clinic.api.renderers import dumps
from clinic.errors import Conflict
from integrations.models import ApiClient, IdempotencyRecord

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_KEPT_HEADERS = ("Location",)


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
    """Own the key (returns the record) or answer from it (returns the replay); raises 409/422."""
    now = timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {IdempotencyRecord._meta.db_table} "  # noqa: S608 - table name is ours
                "(client_id, key, fingerprint, state, response_body, response_headers, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, '', '{}', %s, %s) ON CONFLICT (client_id, key) DO NOTHING RETURNING id",
                [client.pk, key, digest, IdempotencyRecord.State.IN_PROGRESS, now, now],
            )
            inserted = cursor.fetchone()
        record = (
            IdempotencyRecord.objects.select_for_update().get(pk=inserted[0])
            if inserted
            else IdempotencyRecord.objects.select_for_update().get(client=client, key=key)
        )
        if inserted:
            return record
        expired = record.created_at < now - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
        stale = record.state == IdempotencyRecord.State.IN_PROGRESS and record.updated_at < now - timedelta(
            seconds=settings.IDEMPOTENCY_STALE_AFTER_SECONDS
        )
        if expired or (stale and record.fingerprint == digest):
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
        if record.state == IdempotencyRecord.State.IN_PROGRESS:
            raise Conflict(
                "A request with this Idempotency-Key is still in progress; retry later.",
                code="idempotency_key_in_use",
            )
        return _replay(record)


def execute(*, client: ApiClient, key: str, request: Request, handler: Callable[[], Response]) -> HttpResponse:
    """Run `handler` at most once per (client, key); `handler` returns a response and never raises."""
    validate_key(key)
    reserved = _reserve(client, key, fingerprint(request))
    if isinstance(reserved, HttpResponse):
        return reserved
    record = reserved
    stored = False
    try:
        with transaction.atomic():
            response = handler()
            if response.status_code >= 500:
                transaction.set_rollback(True)
            else:
                record.state = IdempotencyRecord.State.COMPLETED
                record.response_status = response.status_code
                stored_data = _stored_data(response)
                record.response_body = _seal(dumps(stored_data).decode() if stored_data is not None else "")
                record.response_headers = {
                    "Content-Type": response.content_type or "application/json",
                    **{name: response[name] for name in _KEPT_HEADERS if response.has_header(name)},
                }
                record.updated_at = timezone.now()
                record.save()
                stored = True
        return response
    finally:
        if not stored:
            IdempotencyRecord.objects.filter(pk=record.pk, state=IdempotencyRecord.State.IN_PROGRESS).delete()


def purge_expired() -> int:
    cutoff = timezone.now() - timedelta(seconds=settings.IDEMPOTENCY_KEY_TTL_SECONDS)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()
    return deleted
