"""The organisation every other app points at: branches, departments and doctors."""

from __future__ import annotations

import re
import uuid
import zoneinfo
from typing import Any, Self

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Exists, OuterRef
from django.db.models.functions import Lower

from clinic.states import GST_STATE_CODES, IndianState, gstin_check_character
from clinic.visibility import BranchRestricted, BranchScopedQuerySet, client_branch_ids

GSTIN_PATTERN = re.compile(r"^[0-9]{2}[A-Z]{5}[0-9]{4}[A-Z][1-9A-Z]Z[0-9A-Z]$")


def validate_time_zone(value: str) -> None:
    if value not in zoneinfo.available_timezones():
        raise ValidationError(f"{value!r} is not an IANA time zone (for example Asia/Kolkata).", code="invalid")


class TimeStampedModel(models.Model):
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class BranchQuerySet(BranchScopedQuerySet["Branch"]):
    branch_path = "id"


class Branch(TimeStampedModel):
    """A clinic or hospital site. Its state decides GST treatment, its time zone what "a day" is."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    code = models.CharField(
        max_length=10,
        unique=True,
        validators=[RegexValidator(r"^[A-Z0-9]{2,10}$", "2-10 upper-case letters or digits, e.g. BLR.")],
        help_text="Short code used in invoice numbers, e.g. BLR.",
    )
    name = models.CharField(max_length=200)
    state = models.CharField(max_length=60, choices=IndianState.choices)
    gstin = models.CharField("GSTIN", max_length=15, blank=True, help_text="15-character GST number.")
    time_zone = models.CharField(max_length=64, default="Asia/Kolkata", validators=[validate_time_zone])
    cancellation_window_minutes = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(7 * 24 * 60)],
        help_text="Patients cannot cancel through the API within this many minutes before the slot. 0: any time.",
    )
    address_line1 = models.CharField(max_length=200, blank=True)
    city = models.CharField(max_length=100, blank=True)
    pincode = models.CharField(max_length=6, blank=True, validators=[RegexValidator(r"^\d{6}$", "Six digits.")])
    phone = models.CharField(max_length=20, blank=True)
    is_active = models.BooleanField(default=True)
    is_head_office = models.BooleanField(
        default=False,
        db_default=False,  # rows written by COPY (scale data) or raw SQL need no value
        help_text="The organisation's head office: where API clients of several branches register patients "
        "that arrive without a branch_id (unless the client has a default registration branch).",
    )

    objects = BranchQuerySet.as_manager()

    class Meta:
        ordering = ["code"]
        verbose_name_plural = "branches"
        constraints = [
            models.CheckConstraint(condition=models.Q(code__regex=r"^[A-Z0-9]{2,10}$"), name="branch_code_format"),
            # The state decides CGST+SGST or IGST: it must be one of the list, never free text (migration 0005).
            models.CheckConstraint(
                condition=models.Q(state__in=IndianState.values),
                name="branch_state_known",
                violation_error_message="Choose the state from the list of Indian states and union territories.",
            ),
            models.UniqueConstraint(
                fields=["is_head_office"],
                condition=models.Q(is_head_office=True),
                name="branch_one_head_office",
                violation_error_message="Another branch is already the head office.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.code} · {self.name}"

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.time_zone)

    def clean(self) -> None:
        if self.code:
            self.code = self.code.upper()
        if self.gstin:
            self.gstin = self.gstin.upper()
            if not GSTIN_PATTERN.match(self.gstin):
                raise ValidationError({"gstin": "Not a GSTIN: expected 15 characters like 29ABCDE1234F1ZW."})
            if self.gstin[14] != gstin_check_character(self.gstin[:14]):
                raise ValidationError(
                    {"gstin": "Not a valid GSTIN: its last character does not match the check character of the rest."}
                )
            expected = GST_STATE_CODES.get(self.state)
            if expected and self.gstin[:2] != expected:
                raise ValidationError(
                    {"gstin": f"A GSTIN registered in {self.state} starts with {expected}, not {self.gstin[:2]}."}
                )


class Department(TimeStampedModel):
    """A clinical department (Cardiology, Paediatrics...), shared across branches."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(Lower("name"), name="department_name_unique_ci")]

    def __str__(self) -> str:
        return self.name


class DoctorQuerySet(BranchScopedQuerySet["Doctor"]):
    """A doctor is visible through the active branches they work at: a doctor whose only branches are closed or
    hidden from the client has no slot to offer it (and the branch list hides closed branches too)."""

    def visible_to(self, client: BranchRestricted) -> Self:
        return self._working_at(client_branch_ids(client), active_only=True)

    def at_branches(self, branch_ids: Any) -> Self:
        return self._working_at(branch_ids, active_only=False)

    def _working_at(self, branch_ids: Any, *, active_only: bool) -> Self:
        # EXISTS over the doctor's branches, not a join: a doctor at two visible branches is one row.
        works_there = Doctor.branches.through.objects.filter(doctor_id=OuterRef("pk"))
        if branch_ids is not None:
            works_there = works_there.filter(branch_id__in=branch_ids)
        if active_only:
            works_there = works_there.filter(branch__is_active=True)
        return self.filter(Exists(works_there))


class Doctor(TimeStampedModel):
    """A practitioner in one department, consulting at one or more branches."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="doctors")
    branches = models.ManyToManyField(Branch, related_name="doctors")
    default_slot_minutes = models.PositiveSmallIntegerField(
        "default slot duration (minutes)",
        default=15,
        validators=[MinValueValidator(5), MaxValueValidator(240)],
    )
    registration_number = models.CharField(max_length=50, blank=True, help_text="Medical council registration.")
    is_active = models.BooleanField(default=True)

    objects = DoctorQuerySet.as_manager()

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(default_slot_minutes__gte=5, default_slot_minutes__lte=240),
                name="doctor_slot_minutes_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class EnteredInErrorModel(models.Model):
    """A clinical record that is never deleted (docs/api-rules.md §7): a row entered in error is marked so,
    with who, when and why, drops out of profiles and summaries, and stays readable to staff. Marked only
    through clinic.records.clinical_record_mark_entered_in_error. Each concrete model adds
    entered_in_error_constraint() to its Meta.constraints (an abstract Meta's constraints would be lost
    by models that declare their own Meta)."""

    entered_in_error = models.BooleanField(default=False, db_default=False)
    entered_in_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    entered_in_error_by = models.CharField(
        max_length=200, blank=True, default="", db_default="", editable=False, help_text='"staff:<username>"'
    )
    entered_in_error_reason = models.CharField(max_length=500, blank=True, default="", db_default="", editable=False)

    class Meta:
        abstract = True


def entered_in_error_constraint(name: str) -> models.CheckConstraint:
    """The marker's four fields are set together, with a non-blank actor and reason, or not at all."""
    unmarked = models.Q(
        entered_in_error=False, entered_in_error_at__isnull=True, entered_in_error_by="", entered_in_error_reason=""
    )
    marked = models.Q(
        entered_in_error=True,
        entered_in_error_at__isnull=False,
        entered_in_error_by__regex=r"\S",
        entered_in_error_reason__regex=r"\S",
    )
    return models.CheckConstraint(condition=unmarked | marked, name=name)


class RecordChange(models.Model):
    """The history of a clinical or financial record as staff changed it in the admin, and of the marks
    that replace deletion (entered in error, deactivation, merge): who, when, and each field's old and new
    value. Insert-only; national IDs appear masked, never in clear (clinic.records.record_change_write)."""

    class Action(models.TextChoices):
        ADDED = "added"
        CHANGED = "changed"
        ENTERED_IN_ERROR = "entered_in_error"
        DEACTIVATED = "deactivated"
        MERGED = "merged"

    id = models.BigAutoField(primary_key=True)
    content_type = models.ForeignKey("contenttypes.ContentType", on_delete=models.PROTECT, related_name="+")
    object_id = models.CharField(max_length=64)
    # The patient the record belongs to, so a patient's whole history is one indexed filter.
    patient_id = models.UUIDField(null=True, blank=True)
    at = models.DateTimeField()
    actor = models.CharField(max_length=200, help_text='"staff:<username>" or "system".')
    action = models.CharField(max_length=20, choices=Action.choices)
    changes = models.JSONField(default=dict, blank=True, help_text='{"field": [old, new]}')
    reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["content_type", "object_id", "-at"], name="record_change_object"),
            models.Index(fields=["patient_id", "-at"], name="record_change_patient"),
        ]

    def __str__(self) -> str:
        return f"{self.content_type_id}:{self.object_id} {self.action} by {self.actor}"


class BranchYearCounter(models.Model):
    """The last number a branch issued in a calendar year, in one series: the abstract base of every per-branch,
    per-year counter (lab orders and accessions, prescriptions, dispenses), which clinic.db.counter_next
    advances. Each concrete counter adds its own unique (branch, year) constraint."""

    id = models.BigAutoField(primary_key=True)
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="+")
    year = models.PositiveSmallIntegerField()
    last_number = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.branch_id} {self.year}: {self.last_number}"


class EncryptionCanary(models.Model):
    """One row holding a known text encrypted with FIELD_ENCRYPTION_KEY: /readyz decrypts it, so a pod
    started with a key that cannot read the database (a restore under another deployment's key, the old
    key dropped before a rotation finished) is never ready (clinic.field_encryption). Written at the first
    readiness check, re-encrypted by `rotate_field_encryption` like every other encrypted value."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    token = models.TextField()
    written_at = models.DateTimeField()

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="encryption_canary_single_row")]

    def __str__(self) -> str:
        return f"encryption canary written {self.written_at:%Y-%m-%d %H:%M}"


class StaffProfile(models.Model):
    """Where a staff user works: the branches whose rows they see and change in the admin (docs/staff.md).

    A user with no profile, or with no branches, sees no branch's rows unless marked network-wide; a
    superuser too, so an account never reaches every branch by default."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="staff_profile"
    )
    branches = models.ManyToManyField(
        Branch, blank=True, related_name="+", help_text="The branches this user works at and sees in the admin."
    )
    network_wide = models.BooleanField(
        "network-wide",
        default=False,
        help_text="Sees and changes every branch's rows, whatever branches are chosen (network administrators, "
        "head-office accounts).",
    )

    class Meta:
        verbose_name = "staff branches"
        verbose_name_plural = "staff branches"

    def __str__(self) -> str:
        return f"branches of {self.user}"
