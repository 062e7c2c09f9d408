"""The locks the patients services take, each held until the transaction commits.

Lock order, whatever the write: patient rows first (two or more in primary-key order), then the
identity lock of the phone and birth date being registered or changed to.

- Registration: the identity only (the new row is this transaction's own).
- Update: the patient's row, then, when the phone or birth date change, the new identity.
- Deactivation: the patient's row.
- Merge: the source and target rows in primary-key order, then the rows merged into the source earlier
  (in primary-key order too), so two merges of one pair in opposite directions cannot deadlock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import date

from django.db import connection

from patients.models import Patient


def identity_lock(*, phone: str, date_of_birth: date) -> None:
    """Serialise registrations of one phone+birth date until commit, so two concurrent creates of the same
    person cannot both pass the duplicate check (a transaction-scoped advisory lock: there is no row yet)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"patient:{phone}:{date_of_birth}"])


def patient_lock(*, patient_id: uuid.UUID) -> Patient:
    """Re-read the patient under a row lock."""
    return Patient.objects.select_for_update().get(pk=patient_id)


def patients_lock(*, patient_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Patient]:
    """Re-read several patients under row locks taken in primary-key order, by id."""
    return {p.pk: p for p in Patient.objects.select_for_update().filter(pk__in=list(patient_ids)).order_by("pk")}


def merged_into_lock(*, patient_id: uuid.UUID) -> list[Patient]:
    """The records merged into this patient earlier, locked in primary-key order."""
    return list(Patient.objects.select_for_update().filter(merged_into_id=patient_id).order_by("pk"))
