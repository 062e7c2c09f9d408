"""Where the database holds values encrypted with FIELD_ENCRYPTION_KEY, the rotation that re-encrypts and
re-hashes them under the first key while the service serves, and the canary /readyz decrypts
(docs/backup-and-recovery.md sections 6 and 7).

The tables are named by app label, not imported: this module sits in `clinic`, below the apps that own
them, and only the rotation command and readiness read them. tests/clinic/test_field_encryption.py fails
when a model gains an `*_encrypted` column this list does not name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.db import models, transaction
from django.utils import timezone

from clinic import crypto
from clinic.models import EncryptionCanary

CANARY_TEXT = "clinic.field-encryption.canary"
CANARY_ERROR = "error: FIELD_ENCRYPTION_KEY cannot decrypt what the database holds (it was written under another key)"


@dataclass(frozen=True)
class EncryptedTable:
    model: str  # "app_label.ModelName"
    columns: tuple[str, ...]  # Fernet tokens; "" is no value
    # (hash column, the encrypted column whose plaintext it hashes): re-hashed with the first key.
    hashes: tuple[tuple[str, str], ...] = ()

    def model_class(self) -> type[models.Model]:
        return apps.get_model(self.model)


ENCRYPTED_TABLES = (
    EncryptedTable("clinic.EncryptionCanary", ("token",)),
    EncryptedTable(
        "patients.Patient", ("national_id_encrypted",), hashes=(("national_id_hash", "national_id_encrypted"),)
    ),
    EncryptedTable(
        "integrations.WebhookSubscription",
        ("secret_encrypted", "previous_secret_encrypted", "extra_headers_encrypted"),
    ),
    # Stored API responses, sealed by clinic.api.idempotency for their 24 hours.
    EncryptedTable("integrations.IdempotencyRecord", ("response_body",)),
)


def _sealed(value: str | None) -> bool:
    # An idempotency record written before responses were sealed holds JSON; a Fernet token never starts so.
    return bool(value) and value[0] not in "[{"  # type: ignore[index]


# The canary


def canary_status() -> str:
    """ "ok", or "error: ..." naming the reason (never a key) for /readyz.

    Without a canary row (a fresh database, or one restored from before it existed) one stored value of each
    encrypted table is decrypted first, and the canary is written only when they all read: a pod started
    with a wrong key must not plant a canary that vouches for that key."""
    token = EncryptionCanary.objects.filter(pk=1).values_list("token", flat=True).first()
    try:
        if token is None:
            for table in ENCRYPTED_TABLES[1:]:
                for value in _samples(table):
                    crypto.decrypt(value)
            canary = EncryptionCanary(id=1, token=crypto.encrypt(CANARY_TEXT), written_at=timezone.now())
            EncryptionCanary.objects.bulk_create([canary], ignore_conflicts=True)
            token = EncryptionCanary.objects.filter(pk=1).values_list("token", flat=True).get()
        if crypto.decrypt(token) != CANARY_TEXT:
            return CANARY_ERROR
    except crypto.DecryptionError:
        return CANARY_ERROR
    return "ok"


def _samples(table: EncryptedTable) -> list[str]:
    """The newest stored value of each encrypted column of `table` (at most one each)."""
    manager = table.model_class()._base_manager
    found = []
    for column in table.columns:
        values = manager.exclude(**{column: ""}).order_by("-pk").values_list(column, flat=True)[:5]
        found.extend([value for value in values if _sealed(value)][:1])
    return found


# The rotation


@dataclass
class TableReport:
    model: str
    scanned: int = 0
    reencrypted: int = 0  # values (a row may hold several)
    rehashed: int = 0
    rows_written: int = 0
    undecryptable: list[Any] = field(default_factory=list)  # primary keys of rows no configured key reads


def rotate_table(
    table: EncryptedTable, *, batch_size: int, dry_run: bool, progress: Callable[[TableReport], None]
) -> TableReport:
    """Re-encrypt every value of `table` not under the first key and re-hash its lookup hashes, in pages of
    `batch_size` rows by primary key (keyset), each page its own short transaction.

    A page locks its rows FOR UPDATE SKIP LOCKED, so it never waits behind a request editing one of them, and
    the values it rewrites are the committed ones of that moment (a request's newer value is not
    overwritten with an older one re-encrypted). Rows skipped so are taken again at the end, waiting for
    their locks then. Values already under the first key are left alone: a second run, or one resumed after
    an interruption, rewrites nothing it already did."""
    report = TableReport(table.model)
    manager = table.model_class()._base_manager
    skipped: list[Any] = []
    last = None
    while True:
        page = manager.order_by("pk")
        if last is not None:
            page = page.filter(pk__gt=last)
        ids = list(page.values_list("pk", flat=True)[:batch_size])
        if not ids:
            break
        skipped.extend(_rotate_rows(table, ids, report, dry_run=dry_run, skip_locked=True))
        last = ids[-1]
        progress(report)
    for start in range(0, len(skipped), batch_size):
        _rotate_rows(table, skipped[start : start + batch_size], report, dry_run=dry_run, skip_locked=False)
        progress(report)
    return report


def _rotate_rows(
    table: EncryptedTable, ids: Sequence[Any], report: TableReport, *, dry_run: bool, skip_locked: bool
) -> list[Any]:
    """Rotate the rows `ids`; returns those skipped because a transaction held them."""
    manager = table.model_class()._base_manager
    hash_columns = [hash_column for hash_column, _ in table.hashes]
    with transaction.atomic():
        rows = manager.filter(pk__in=ids).order_by("pk")
        if not dry_run:
            rows = rows.select_for_update(skip_locked=skip_locked)
        seen = set()
        for row in rows.values("pk", *table.columns, *hash_columns):
            seen.add(row["pk"])
            report.scanned += 1
            try:
                changes = _changes(table, row, report)
            except crypto.DecryptionError:
                report.undecryptable.append(row["pk"])
                continue
            if changes:
                report.rows_written += 1
                if not dry_run:
                    # update(), not save(): a rotation is no change of the record (no updated_at, no event).
                    manager.filter(pk=row["pk"]).update(**changes)
    return [pk for pk in ids if pk not in seen]


def _changes(table: EncryptedTable, row: dict[str, Any], report: TableReport) -> dict[str, str]:
    changes = {}
    for column in table.columns:
        if _sealed(row[column]):
            rotated = crypto.rotate(row[column])
            if rotated is not None:
                changes[column] = rotated
                report.reencrypted += 1
    for hash_column, source in table.hashes:
        if _sealed(row[source]):
            current = crypto.lookup_hash(crypto.decrypt(row[source]))
            if row[hash_column] != current:
                changes[hash_column] = current
                report.rehashed += 1
    return changes
