"""Clinical and financial records are never hard-deleted (docs/api-rules.md §7). The shared mechanism, so
every app that holds such records (patients, appointments, billing; lab and pharmacy next) uses the same:

- in PostgreSQL, a BEFORE DELETE trigger on each record table (refuse_delete_sql, for a RunSQL in the
  app's migration) that refuses even raw SQL; TRUNCATE, which only tests and a rebuilt database use, is not
  a row event and stays possible;
- a row entered in error is marked (clinic.models.EnteredInErrorModel) by
  clinical_record_mark_entered_in_error, never removed;
- every change staff make in the admin, and every mark, is a RecordChange row (record_change_write).
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, models, transaction
from django.db.models.deletion import ProtectedError, RestrictedError
from django.utils import timezone

from clinic.errors import FieldError, InvalidState, RecordNotDeletable
from clinic.models import EnteredInErrorModel, RecordChange

# The SQLSTATE the triggers raise, so a refusal is recognised without reading the message (which names the row).
REFUSAL_SQLSTATE = "23001"  # restrict_violation

# Created once (clinic migration 0003); each table's trigger passes its own noun as the argument.
REFUSE_DELETE_FUNCTION = """
CREATE OR REPLACE FUNCTION clinic_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'records are never deleted: DELETE of % % refused', TG_ARGV[0], OLD.id
        USING ERRCODE = 'restrict_violation',
              HINT = 'Mark the record entered in error, or deactivate or merge the patient (docs/api-rules.md §7).';
END;
$$;
"""
DROP_REFUSE_DELETE_FUNCTION = "DROP FUNCTION IF EXISTS clinic_refuse_delete();"


def refuse_delete_sql(table: str, noun: str) -> tuple[str, str]:
    """(forward, reverse) SQL for a migration's RunSQL: PostgreSQL refuses every DELETE on `table`."""
    trigger = f"{table}_never_deleted"
    forward = (
        f"CREATE TRIGGER {trigger} BEFORE DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION clinic_refuse_delete('{noun}');"
    )
    return forward, f"DROP TRIGGER IF EXISTS {trigger} ON {table};"


def is_delete_refusal(exc: BaseException) -> bool:
    cause = getattr(exc, "__cause__", None)
    # Any restrict_violation: the payment trigger (billing 0002) words its refusal differently.
    return isinstance(exc, IntegrityError) and getattr(cause, "sqlstate", None) == REFUSAL_SQLSTATE


@contextmanager
def deletes_refused() -> Iterator[None]:
    """Turns the ORM's protection (PROTECT) and the database's refusal (the trigger) into a domain error,
    so a delete attempted anywhere becomes a 409 or an admin message, never a 500. PostgreSQL's message is
    not copied: it names the row."""
    try:
        yield
    except (ProtectedError, RestrictedError) as exc:
        raise RecordNotDeletable(
            "Clinical and financial records are never deleted: deactivate or merge the patient, or mark the "
            "record entered in error."
        ) from exc
    except IntegrityError as exc:
        if not is_delete_refusal(exc):
            raise
        raise RecordNotDeletable(
            "Clinical and financial records are never deleted: mark the record entered in error instead."
        ) from exc


def mask_value(field: str, value: Any) -> Any:
    """A JSON-safe value for the history; anything that holds a national ID is masked."""
    if value is None or isinstance(value, bool | int | str | float):
        if "national_id" in field and value:
            text = "".join(ch for ch in str(value) if ch.isdigit())
            return f"XXXX-XXXX-{text[-4:]}" if len(text) >= 4 else "XXXX"
        return value
    if isinstance(value, models.Model):
        return str(value.pk)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    return str(value)


def record_change_write(
    *,
    record: models.Model,
    actor: str,
    action: str,
    changes: dict[str, tuple[Any, Any]] | None = None,
    reason: str = "",
    patient_id: uuid.UUID | None = None,
) -> RecordChange:
    """One history row for `record`. `changes` maps each field to (old, new); values are masked and made
    JSON-safe here, so no caller can write a national ID in clear."""
    if patient_id is None:
        # A patient's own `patient_id` is its business id; its records point at it through `patient`.
        is_patient = record._meta.label == "patients.Patient"
        patient_id = record.pk if is_patient else getattr(record, "patient_id", None)
    return RecordChange.objects.create(
        content_type=ContentType.objects.get_for_model(record, for_concrete_model=True),
        object_id=str(record.pk),
        patient_id=patient_id,
        at=timezone.now(),
        actor=actor,
        action=action,
        changes={
            field: [mask_value(field, old), mask_value(field, new)] for field, (old, new) in (changes or {}).items()
        },
        reason=reason,
    )


def record_history(record: models.Model) -> models.QuerySet[RecordChange]:
    """The history rows of one record, newest first."""
    return RecordChange.objects.filter(
        content_type=ContentType.objects.get_for_model(record, for_concrete_model=True), object_id=str(record.pk)
    )


Record = TypeVar("Record", bound=EnteredInErrorModel)


@transaction.atomic
def clinical_record_mark_entered_in_error(*, record: Record, by: str, reason: str) -> Record:
    """Mark a clinical record entered in error: it leaves profiles and summaries and stays readable to
    staff with its history. Refuses a blank reason (400) and a record already marked (409)."""
    reason = (reason or "").strip()
    if not reason:
        raise FieldError({"reason": "Required: say why the record was entered in error."})
    model = type(record)
    locked = model._default_manager.select_for_update().get(pk=record.pk)
    if locked.entered_in_error:
        raise InvalidState(f"{locked} is already marked entered in error.")
    locked.entered_in_error = True
    locked.entered_in_error_at = timezone.now()
    locked.entered_in_error_by = by
    locked.entered_in_error_reason = reason
    locked.save(
        update_fields=["entered_in_error", "entered_in_error_at", "entered_in_error_by", "entered_in_error_reason"]
    )
    record_change_write(
        record=locked,
        actor=by,
        action=RecordChange.Action.ENTERED_IN_ERROR,
        changes={"entered_in_error": (False, True)},
        reason=reason,
    )
    return locked
