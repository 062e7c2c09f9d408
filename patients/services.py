"""Writes on patients: registration with race-safe duplicate detection, partial updates, deactivation and
merges. Each publishes its patient event (patients.events) in its own transaction: `patient.registered`, or
`patient.updated` when the record actually changed."""

from __future__ import annotations

from collections import Counter
from datetime import date
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from clinic import crypto
from clinic.db import violated_constraint
from clinic.errors import FieldError, InvalidState
from clinic.models import Branch, RecordChange
from clinic.records import record_change_write
from patients import events, locks
from patients.errors import DuplicatePatient
from patients.identifiers import format_patient_id
from patients.models import Insurance, Medication, Patient

PATIENT_NUMBER_SEQUENCE = "patients_patient_number_seq"
# The ABHA number column's unique constraint, as PostgreSQL named it when migration 0001 created the table.
ABHA_UNIQUE_CONSTRAINT = "patients_patient_national_health_id_key"

# Create/PATCH fields (API and admin) that map one-to-one onto model columns.
COLUMN_FIELDS = (
    "first_name",
    "last_name",
    "date_of_birth",
    "gender",
    "phone",
    "email",
    "blood_group",
    "national_health_id",
    "is_active",
)
ADDRESS_FIELDS = {
    "line1": "address_line1",
    "city": "address_city",
    "state": "address_state",
    "pincode": "address_pincode",
}
# What a create/PATCH may change on the row, compared before and after an update: an update that changes
# none of them (nor the insurance list) publishes nothing. The national ID by its lookup hash (its
# ciphertext differs on every encryption of the same number).
_RECORD_FIELDS = (*COLUMN_FIELDS, *ADDRESS_FIELDS.values(), "national_id_hash", "registration_branch_id")


def patient_duplicate_find(
    *, phone: str, date_of_birth: date, exclude_id: Any = None, visible_branch_ids: frozenset[Any] | None = None
) -> Patient | None:
    """The active patient registered first with this phone and birth date (the duplicate rule), preferring
    one at a branch the caller may see."""
    existing = Patient.objects.filter(phone=phone, date_of_birth=date_of_birth, is_active=True)
    if exclude_id is not None:
        existing = existing.exclude(id=exclude_id)
    candidates = list(existing.order_by("registered_at").only("id", "patient_id", "registration_branch_id")[:50])
    visible = [p for p in candidates if visible_branch_ids is None or p.registration_branch_id in visible_branch_ids]
    chosen = visible or candidates
    return chosen[0] if chosen else None


# A client restricted to some branches learns nothing about patients outside them beyond what it sent
# (docs/api-rules.md §7): the conflict is reported, without the other record's ids.
_ELSEWHERE = "This person is already registered at another branch of the network; ask that branch to share the record."


def _visible(patient: Patient, visible_branch_ids: frozenset[Any] | None) -> bool:
    return visible_branch_ids is None or patient.registration_branch_id in visible_branch_ids


def _check_duplicate(
    *, phone: str, date_of_birth: date, exclude_id: Any = None, visible_branch_ids: frozenset[Any] | None = None
) -> None:
    match = patient_duplicate_find(
        phone=phone, date_of_birth=date_of_birth, exclude_id=exclude_id, visible_branch_ids=visible_branch_ids
    )
    if match is None:
        return
    if not _visible(match, visible_branch_ids):
        raise DuplicatePatient(_ELSEWHERE)
    raise DuplicatePatient(
        f"Patient {match.patient_id} already has this phone number and date of birth.",
        existing_patient_id=match.patient_id,
        existing_id=str(match.id),
    )


def _check_abha_free(patient: Patient, visible_branch_ids: frozenset[Any] | None) -> None:
    """A taken ABHA number: a 400 on the field when its holder is visible to the caller, else a 409 that
    names no record."""
    if not patient.national_health_id:
        return
    holder = (
        Patient.objects.filter(national_health_id=patient.national_health_id)
        .exclude(pk=patient.pk)
        .only("id", "registration_branch_id")
        .first()
    )
    if holder is None:
        return
    if not _visible(holder, visible_branch_ids):
        raise DuplicatePatient(_ELSEWHERE)
    raise FieldError({"national_health_id": "This ABHA number is already registered to another patient."})


def _save(patient: Patient, visible_branch_ids: frozenset[Any] | None = None) -> None:
    """Save, turning a taken ABHA number (unique column) into a 400 on national_health_id instead of a 500.
    The savepoint keeps the surrounding transaction usable; a concurrent registration of the same ABHA
    number is caught the same way."""
    _check_abha_free(patient, visible_branch_ids)
    try:
        with transaction.atomic():
            patient.save()
    except IntegrityError as exc:
        if violated_constraint(exc) == ABHA_UNIQUE_CONSTRAINT:
            _check_abha_free(patient, visible_branch_ids)  # a concurrent registration took it: say whose
            raise FieldError(
                {"national_health_id": "This ABHA number is already registered to another patient."}
            ) from None
        raise


def _set_national_id(patient: Patient, national_id: str | None) -> None:
    if national_id and patient.national_id_hash in crypto.lookup_hashes(national_id):
        # The number it holds, perhaps hashed under a key a rotation has not yet replaced: unchanged, so no
        # `patient.updated` for it (rotate_field_encryption re-encrypts and re-hashes it).
        return
    if national_id:
        patient.national_id_encrypted = crypto.encrypt(national_id)
        patient.national_id_hash = crypto.lookup_hash(national_id)
        patient.national_id_last4 = national_id[-4:]
    else:
        patient.national_id_encrypted = patient.national_id_hash = patient.national_id_last4 = ""


def _apply(patient: Patient, data: dict[str, Any]) -> None:
    for field in COLUMN_FIELDS:
        if field in data:
            setattr(patient, field, data[field] if data[field] is not None or field == "national_health_id" else "")
    for key, column in ADDRESS_FIELDS.items():
        if key in (data.get("address") or {}):
            setattr(patient, column, data["address"][key] or "")
    if "national_id" in data:
        _set_national_id(patient, data["national_id"])
    if "branch" in data:
        patient.registration_branch = data["branch"]


@transaction.atomic
def patient_create(
    *,
    branch: Branch,
    data: dict[str, Any],
    visible_branch_ids: frozenset[Any] | None = None,
    publish: bool = True,
    distinct_person_confirmed: bool = False,
) -> Patient:
    """Register a patient and publish `patient.registered`. `data` holds validated create fields; raises
    DuplicatePatient (409). `visible_branch_ids`: the branches the caller may see (None: all), so a
    conflict with a record elsewhere names no ids. `publish=False`: the caller saves more of the patient
    in this transaction and publishes afterwards (patient_saved_publish). `distinct_person_confirmed`:
    staff saw the registrations with this phone and birth date and confirmed this is another person
    (twins sharing a parent's phone); only the admin offers it, the API never does."""
    locks.identity_lock(phone=data["phone"], date_of_birth=data["date_of_birth"])
    if not distinct_person_confirmed:
        _check_duplicate(
            phone=data["phone"], date_of_birth=data["date_of_birth"], visible_branch_ids=visible_branch_ids
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(%s)", [PATIENT_NUMBER_SEQUENCE])
        number = cursor.fetchone()[0]
    patient = Patient(patient_id=format_patient_id(number), registration_branch=branch)
    _apply(patient, data)
    _save(patient, visible_branch_ids)
    _replace_insurance(patient, data.get("insurance") or [])
    if publish:
        events.publish(events.PATIENT_REGISTERED, patient)
    return patient


@transaction.atomic
def patient_update(
    *,
    patient: Patient,
    data: dict[str, Any],
    visible_branch_ids: frozenset[Any] | None = None,
    publish: bool = True,
    distinct_person_confirmed: bool = False,
) -> Patient:
    """Apply a partial update; the duplicate rule is checked again when phone or birth date change. Publishes
    `patient.updated` when a value actually changed (identical values publish nothing). `publish=False` and
    `distinct_person_confirmed`: as for patient_create."""
    locked = locks.patient_lock(patient_id=patient.pk)
    before = _record_state(locked)
    phone = data.get("phone", locked.phone)
    date_of_birth = data.get("date_of_birth", locked.date_of_birth)
    if (phone, date_of_birth) != (locked.phone, locked.date_of_birth) and not distinct_person_confirmed:
        locks.identity_lock(phone=phone, date_of_birth=date_of_birth)
        _check_duplicate(
            phone=phone, date_of_birth=date_of_birth, exclude_id=locked.pk, visible_branch_ids=visible_branch_ids
        )
    _apply(locked, data)
    _save(locked, visible_branch_ids)
    changed = _record_state(locked) != before
    if "insurance" in data and _insurance_differs(locked, data["insurance"] or []):
        _replace_insurance(locked, data["insurance"] or [])
        changed = True
    if changed and publish:
        events.publish(events.PATIENT_UPDATED, locked)
    return locked


def _record_state(patient: Patient) -> tuple[Any, ...]:
    return tuple(getattr(patient, field) for field in _RECORD_FIELDS)


def _insurance_differs(patient: Patient, entries: list[dict[str, Any]]) -> bool:
    """Whether `entries` are other than the stored ones, order aside (the profile orders them itself)."""
    stored = Counter(patient.insurance.values_list("provider", "policy_number", "valid_until"))
    return stored != Counter((entry["provider"], entry["policy_number"], entry.get("valid_until")) for entry in entries)


@transaction.atomic(savepoint=False)
def patient_saved_publish(*, patient: Patient, registered: bool) -> None:
    """Publish the event of a registration (`registered`) or of a change saved with publish=False, once the
    rest of the change is saved too, so the profile it carries is the one that commits: the admin's patient
    page, after its inlines. Call it in the transaction of the change, and only when something changed."""
    events.publish(events.PATIENT_REGISTERED if registered else events.PATIENT_UPDATED, patient)


def _replace_insurance(patient: Patient, entries: list[dict[str, Any]]) -> None:
    patient.insurance.all().delete()
    Insurance.objects.bulk_create(
        Insurance(
            patient=patient,
            provider=entry["provider"],
            policy_number=entry["policy_number"],
            valid_until=entry.get("valid_until"),
        )
        for entry in entries
    )


# Patients are never deleted (docs/api-rules.md §7): a registration is deactivated, or merged into the
# record that survives. Both are recorded in the record's history (clinic.models.RecordChange).


def _required_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise FieldError({"reason": "Required: say why."})
    return reason


@transaction.atomic
def patient_deactivate(*, patient: Patient, by: str, reason: str) -> Patient:
    """Deactivate a registration: it stays readable with all its records, and no longer counts as a
    duplicate of a new one; publishes `patient.updated`. 409 invalid_state when it is inactive already."""
    reason = _required_reason(reason)
    locked = locks.patient_lock(patient_id=patient.pk)
    if not locked.is_active:
        raise InvalidState(f"{locked.patient_id} is already inactive.")
    locked.is_active = False
    locked.save(update_fields=["is_active", "updated_at"])
    record_change_write(
        record=locked,
        actor=by,
        action=RecordChange.Action.DEACTIVATED,
        changes={"is_active": (True, False)},
        reason=reason,
    )
    events.publish(events.PATIENT_UPDATED, locked)
    return locked


@transaction.atomic
def patient_merge(*, source: Patient, target: Patient, by: str, reason: str) -> Patient:
    """Merge a duplicate registration (`source`) into the record that survives (`target`) and return the
    survivor. Nothing moves and nothing is deleted: the source keeps its visits, clinical records,
    appointments and invoices (documents issued under that registration), is deactivated and points at
    the survivor. The survivor's profile includes the merged records' clinical rows, and the API resolves
    the source's ids to the survivor (patients.selectors). Records merged earlier into the source follow
    it to the survivor, so a pointer is never more than one step long.

    Publishes one `patient.updated`, for the survivor (its profile now includes the merged records' rows),
    at the survivor's branch. None for the merged record: its API representation is the survivor's now
    (its ids resolve there), and a subscription limited to its branch is not one to see the survivor."""
    reason = _required_reason(reason)
    if source.pk == target.pk:
        raise FieldError({"target": "A patient cannot be merged into itself."})
    locked = locks.patients_lock(patient_ids=[source.pk, target.pk])
    source, target = locked[source.pk], locked[target.pk]
    if source.merged_into_id is not None:
        raise InvalidState(f"{source.patient_id} is already merged into another record.")
    if target.merged_into_id is not None or not target.is_active:
        raise FieldError({"target": f"{target.patient_id} is inactive or merged; merge into the record that survives."})
    now = timezone.now()
    for earlier in locks.merged_into_lock(patient_id=source.pk):
        earlier.merged_into = target
        earlier.save(update_fields=["merged_into", "updated_at"])
        record_change_write(
            record=earlier,
            actor=by,
            action=RecordChange.Action.MERGED,
            changes={"merged_into": (source.pk, target.pk)},
            reason=reason,
        )
    was_active = source.is_active
    source.merged_into, source.merged_at, source.is_active = target, now, False
    source.save(update_fields=["merged_into", "merged_at", "is_active", "updated_at"])
    record_change_write(
        record=source,
        actor=by,
        action=RecordChange.Action.MERGED,
        changes={"merged_into": (None, target.pk), "is_active": (was_active, False)},
        reason=reason,
    )
    record_change_write(
        record=target,
        actor=by,
        action=RecordChange.Action.MERGED,
        changes={"merged_from": (None, source.pk)},
        reason=reason,
    )
    events.publish(events.PATIENT_UPDATED, target)
    return target


# --- Current medications written by other apps (a prescription's drugs: pharmacy.services)


@transaction.atomic
def medication_start(
    *, patient: Patient, name: str, dosage: str, frequency: str, start_date: date, end_date: date | None = None
) -> Medication:
    """Add a current medication to the patient's profile (until `end_date`, inclusive, or open-ended). The
    caller keeps the link to its source (a prescription item points at the row it started)."""
    return Medication.objects.create(
        patient=patient,
        name=name[:100],
        dosage=dosage[:50],
        frequency=frequency[:50],
        start_date=start_date,
        end_date=end_date,
    )


@transaction.atomic
def medication_end(*, medication: Medication, end_date: date) -> Medication:
    """Stop a medication: it shows in the profile up to `end_date` (the profile lists those ending today or
    later), never after. Ending it earlier than planned only; an end already earlier is kept."""
    if medication.end_date is None or medication.end_date > end_date:
        medication.end_date = end_date
        medication.save(update_fields=["end_date", "updated_at"])
    return medication
