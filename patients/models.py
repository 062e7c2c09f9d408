"""Patients, their identifiers and insurance, clinical summary (diagnoses, allergies, medications) and visits."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Self

from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models import F, Value
from django.db.models.functions import Replace, Upper

from clinic import crypto
from clinic.models import Branch, Department, Doctor, EnteredInErrorModel, TimeStampedModel, entered_in_error_constraint
from clinic.states import IndianState
from clinic.visibility import BranchRestricted, BranchScopedQuerySet, client_branch_ids


class PatientQuerySet(BranchScopedQuerySet["Patient"]):
    branch_path = "registration_branch_id"

    def with_national_id(self, national_id: str) -> Self:
        """Patients holding this national ID, found by its lookup hash under every configured key (a row not
        yet re-hashed by a key rotation still matches; clinic.crypto)."""
        return self.filter(national_id_hash__in=crypto.lookup_hashes(national_id))


class Patient(models.Model):
    """A person registered at a branch. `patient_id` is the business identifier, never reused."""

    class Gender(models.TextChoices):
        MALE = "male"
        FEMALE = "female"
        OTHER = "other"
        UNKNOWN = "unknown"

    class BloodGroup(models.TextChoices):
        A_POS = "A+"
        A_NEG = "A-"
        B_POS = "B+"
        B_NEG = "B-"
        AB_POS = "AB+"
        AB_NEG = "AB-"
        O_POS = "O+"
        O_NEG = "O-"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    patient_id = models.CharField(max_length=32, unique=True, editable=False)
    first_name = models.CharField(max_length=100)
    last_name = models.CharField(max_length=100)
    # "first last" in lower case, kept by the model for the trigram index of fuzzy name search.
    search_name = models.CharField(max_length=201, editable=False)
    date_of_birth = models.DateField()
    gender = models.CharField(max_length=10, choices=Gender.choices)
    phone = models.CharField(max_length=16, help_text="E.164, e.g. +919876543210")
    # Digits of the phone reversed, so "ends with these digits" is a B-tree prefix search.
    phone_digits_reversed = models.CharField(max_length=16, editable=False)
    email = models.EmailField(blank=True)
    address_line1 = models.CharField(max_length=200, blank=True)
    address_city = models.CharField(max_length=100, blank=True)
    # Canonical names only (the API resolves codes and aliases first); no CHECK constraint, because rows
    # from before the list was enforced that name no state were kept as they were (migration 0011).
    address_state = models.CharField(max_length=100, blank=True, choices=IndianState.choices)
    address_pincode = models.CharField(max_length=6, blank=True)
    blood_group = models.CharField(max_length=3, choices=BloodGroup.choices, blank=True)
    registration_branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="patients")
    national_health_id = models.CharField(
        "ABHA number", max_length=14, null=True, blank=True, unique=True, help_text="14 digits, stored without hyphens."
    )
    national_id_encrypted = models.TextField(blank=True, editable=False)
    national_id_hash = models.CharField(max_length=64, blank=True, editable=False, db_index=True)
    national_id_last4 = models.CharField(max_length=4, blank=True, editable=False)
    is_active = models.BooleanField(
        default=True, help_text="Inactive (merged or erroneous) records are not duplicates."
    )
    # Patients are never deleted (docs/api-rules.md §7): a duplicate registration is merged into the record
    # that survives (patients.services.patient_merge). The source keeps its rows; the API resolves its ids
    # to the survivor, whose profile includes them (FHIR Patient.link "replaced-by").
    merged_into = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, editable=False, related_name="merged_patients"
    )
    merged_at = models.DateTimeField(null=True, blank=True, editable=False)
    registered_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = PatientQuerySet.as_manager()

    class Meta:
        ordering = ["-registered_at", "id"]
        indexes = [
            # The list's order. Carries the branch so a page's ids come from the index alone, whatever
            # branches the client sees (patients.selectors.patient_list).
            models.Index(
                fields=["-registered_at", "id"], include=["registration_branch"], name="patient_registered_order"
            ),
            GinIndex(OpClass("search_name", name="gin_trgm_ops"), name="patient_name_trgm"),
            models.Index(OpClass("phone_digits_reversed", name="text_pattern_ops"), name="patient_phone_tail"),
            models.Index(fields=["phone", "date_of_birth"], name="patient_phone_dob"),
            models.Index(fields=["registration_branch", "-registered_at"], name="patient_branch_registered"),
            # Expands a matched name to its patients, newest first (patients.search, FHIR Patient?name=). Carries
            # the id and the branch, so a page's ids come from the index alone however many patients match.
            models.Index(
                fields=["search_name", "-registered_at"],
                include=["id", "registration_branch"],
                name="patient_name_page",
            ),
            # patient_id is matched ignoring case and hyphens (see selectors.patient_id_key).
            models.Index(Upper(Replace("patient_id", Value("-"), Value(""))), name="patient_id_normalised"),
            # FHIR Patient?birthdate=... with its prefixes (integrations.fhir): a range on the date alone.
            models.Index(fields=["date_of_birth"], name="patient_birth_date"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(date_of_birth__gte=date(1900, 1, 1)), name="patient_dob_after_1900"
            ),
            models.CheckConstraint(
                condition=models.Q(national_health_id__regex=r"^\d{14}$"), name="patient_abha_14_digits"
            ),
            models.CheckConstraint(
                condition=models.Q(gender__in=["male", "female", "other", "unknown"]), name="patient_gender_valid"
            ),
            # A merged record is inactive, not merged into itself, and says when it was merged.
            models.CheckConstraint(
                condition=models.Q(merged_into__isnull=True, merged_at__isnull=True)
                | (
                    models.Q(merged_into__isnull=False, merged_at__isnull=False, is_active=False)
                    & ~models.Q(merged_into=models.F("id"))
                ),
                name="patient_merge_consistent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.patient_id} · {self.name}"

    def save(self, *args, **kwargs):
        self.search_name = f"{self.first_name} {self.last_name}".lower().strip()
        self.phone_digits_reversed = "".join(ch for ch in self.phone if ch.isdigit())[::-1]
        update_fields = kwargs.get("update_fields")
        if update_fields is not None:
            kwargs["update_fields"] = {*update_fields, "search_name", "phone_digits_reversed"}
        super().save(*args, **kwargs)

    @property
    def name(self) -> str:
        return f"{self.first_name} {self.last_name}"

    @property
    def national_id_masked(self) -> str | None:
        return f"XXXX-XXXX-{self.national_id_last4}" if self.national_id_last4 else None

    def age_on(self, day: date) -> int:
        dob = self.date_of_birth
        return day.year - dob.year - ((day.month, day.day) < (dob.month, dob.day))


class InsuranceQuerySet(BranchScopedQuerySet["Insurance"]):
    branch_path = "patient__registration_branch_id"  # a patient's record follows the patient


class Insurance(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="insurance")

    provider = models.CharField(max_length=100)
    policy_number = models.CharField(max_length=50)
    valid_until = models.DateField(null=True, blank=True)

    objects = InsuranceQuerySet.as_manager()

    class Meta:
        ordering = ["provider", "id"]
        verbose_name_plural = "insurance"

    def __str__(self) -> str:
        return f"{self.provider} {self.policy_number}"


class DiagnosisQuerySet(BranchScopedQuerySet["Diagnosis"]):
    branch_path = "patient__registration_branch_id"  # a patient's record follows the patient


class Diagnosis(EnteredInErrorModel, TimeStampedModel):
    class Status(models.TextChoices):
        ACTIVE = "active"
        RESOLVED = "resolved"
        INACTIVE = "inactive"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="diagnoses")

    code = models.CharField(max_length=20, help_text="e.g. E11.9")
    system = models.CharField(max_length=20, default="ICD-10")
    description = models.CharField(max_length=255)
    onset_date = models.DateField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)

    objects = DiagnosisQuerySet.as_manager()

    class Meta:
        ordering = ["-onset_date", "id"]
        verbose_name_plural = "diagnoses"
        constraints = [entered_in_error_constraint("diagnosis_entered_in_error_complete")]

    def __str__(self) -> str:
        return f"{self.code} {self.description}"


class AllergyQuerySet(BranchScopedQuerySet["Allergy"]):
    branch_path = "patient__registration_branch_id"  # a patient's record follows the patient


class Allergy(EnteredInErrorModel, TimeStampedModel):
    class Severity(models.TextChoices):
        MILD = "mild"
        MODERATE = "moderate"
        SEVERE = "severe"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="allergies")

    substance = models.CharField(max_length=100)
    reaction = models.CharField(max_length=255, blank=True)
    severity = models.CharField(max_length=10, choices=Severity.choices)

    objects = AllergyQuerySet.as_manager()

    class Meta:
        ordering = ["substance", "id"]
        verbose_name_plural = "allergies"
        constraints = [entered_in_error_constraint("allergy_entered_in_error_complete")]

    def __str__(self) -> str:
        return self.substance


class MedicationQuerySet(BranchScopedQuerySet["Medication"]):
    branch_path = "patient__registration_branch_id"  # a patient's record follows the patient


class Medication(EnteredInErrorModel, TimeStampedModel):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="medications")

    name = models.CharField(max_length=100)
    dosage = models.CharField(max_length=50, blank=True)
    frequency = models.CharField(max_length=50, blank=True)
    start_date = models.DateField(null=True, blank=True)
    end_date = models.DateField(null=True, blank=True, help_text="Empty while the patient still takes it.")

    objects = MedicationQuerySet.as_manager()

    class Meta:
        ordering = ["-start_date", "id"]
        indexes = [
            models.Index(F("start_date").desc(), "id", name="medication_start_order"),  # the admin list
        ]
        constraints = [entered_in_error_constraint("medication_entered_in_error_complete")]

    def __str__(self) -> str:
        return self.name


class VisitQuerySet(BranchScopedQuerySet["Visit"]):
    """A visit is visible where its patient is and where it happened: both branches must be the client's."""

    def visible_to(self, client: BranchRestricted) -> Self:
        allowed = client_branch_ids(client)
        if allowed is None:
            return self.all()
        return self.filter(patient__registration_branch_id__in=allowed, branch_id__in=allowed)


class Visit(EnteredInErrorModel, TimeStampedModel):
    """An outpatient consultation or inpatient stay; completing an appointment adds an outpatient visit."""

    class Type(models.TextChoices):
        OUTPATIENT = "outpatient"
        INPATIENT = "inpatient"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by visit_history below, which leads with the patient.
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="visits", db_index=False)
    type = models.CharField(max_length=10, choices=Type.choices)
    doctor = models.ForeignKey(Doctor, on_delete=models.PROTECT, null=True, blank=True, related_name="visits")
    department = models.ForeignKey(Department, on_delete=models.PROTECT, null=True, blank=True, related_name="visits")
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="visits")
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=255, blank=True)

    objects = VisitQuerySet.as_manager()

    class Meta:
        ordering = ["-start", "id"]
        indexes = [
            # A patient's history in the profile's order, with every column the profile shows: read from the
            # index alone, not from one heap page per visit (a long history's visits are scattered over
            # years of inserts). Also the list's last visit. Carries entered_in_error, which both leave out.
            models.Index(
                fields=["patient", "-start", "id"],
                include=["type", "end", "doctor", "department", "branch", "reason", "entered_in_error"],
                name="visit_patient_history",
            ),
            # FHIR Encounter?date=... across patients, and its default order (-start, id).
            models.Index(fields=["-start", "id"], name="visit_start_order"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(end__isnull=True) | models.Q(end__gte=models.F("start")),
                name="visit_end_after_start",
            ),
            entered_in_error_constraint("visit_entered_in_error_complete"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.start:%Y-%m-%d}"


class RegistrationCount(models.Model):
    """How many patients were registered at a branch on a UTC day, so the list's X-Total-Count and the
    day holding a deep page's first row are read from a few thousand rows instead of counted over every
    patient (patients.selectors.patient_list).

    Kept by statement-level triggers on patients_patient (migration 0004) with transition tables: a COPY
    of a million patients updates each (branch, day) row once, and an update that moves no patient to
    another branch or day writes nothing. The triggers run in the writing transaction, so the counts
    commit and roll back with the patients. Rows that drop to zero stay."""

    pk = models.CompositePrimaryKey("day", "branch")
    # Day first: a deep page walks the days newest first across every branch the client sees.
    day = models.DateField()
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="+")
    # No CHECK (registered >= 0): PostgreSQL checks the row an upsert proposes before ON CONFLICT turns it
    # into an update, and a deletion's upsert proposes its negative change.
    registered = models.IntegerField()

    def __str__(self) -> str:
        return f"{self.day} {self.branch_id}: {self.registered}"


class PatientName(models.Model):
    """Every distinct patient search_name, kept by a trigger on patients_patient (so bulk loads and the
    admin keep it too). Names repeat heavily in a register; fuzzy search finds candidate names through
    their words (patients_nameword and patients_namepart, migration 0006), ranks them here by primary key,
    then expands the best ones to patients through an index (see patients.search). Names are never
    deleted: a name nobody has any more only costs a candidate slot."""

    name = models.CharField(max_length=201, primary_key=True)
    # Each word's letters sorted ("priya sharma" -> "aipry aahmrs"): a swap of two adjacent letters
    # leaves it unchanged, which plain trigrams score poorly. Computed by patients_letter_key().
    letter_key = models.CharField(max_length=201)

    def __str__(self) -> str:
        return self.name
