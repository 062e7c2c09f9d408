"""Laboratory and imaging (docs/api-rules.md §13): the test catalogue (tests, their analytes and reference
ranges), orders with one item per test and its accession number, results kept as versions, and the order
and accession number counters. The invariants live in PostgreSQL."""

from __future__ import annotations

import uuid

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import ArrayField, RangeOperators
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import F, Func, Q
from django.db.models.functions import Now

from appointments.models import Appointment
from billing.models import BillableService, Invoice
from clinic.models import Branch, BranchYearCounter, Doctor, TimeStampedModel
from clinic.visibility import BranchScopedQuerySet
from patients.models import Patient


class TestKind(models.TextChoices):
    LAB = "lab"
    IMAGING = "imaging"


class Modality(models.TextChoices):
    """DICOM modality codes of the imaging tests (what the worklist shows)."""

    CT = "CT", "CT (computed tomography)"
    MR = "MR", "MR (magnetic resonance)"
    US = "US", "US (ultrasound)"
    XR = "XR", "XR (X-ray)"
    DX = "DX", "DX (digital radiography)"
    MG = "MG", "MG (mammography)"
    NM = "NM", "NM (nuclear medicine)"
    PT = "PT", "PT (positron emission tomography)"


class LabTest(TimeStampedModel):
    """A test of the catalogue: a lab test (a specimen, analytes) or an imaging study (a modality)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    code = models.CharField(max_length=30, unique=True, help_text="Stable code API clients order by, e.g. CBC.")
    name = models.CharField(max_length=200)
    loinc_code = models.CharField("LOINC code", max_length=10, help_text="e.g. 58410-2 (CBC panel).")
    kind = models.CharField(max_length=10, choices=TestKind.choices)
    specimen_type = models.CharField(max_length=60, blank=True, help_text="Lab tests: e.g. Whole blood, Serum.")
    modality = models.CharField(max_length=2, choices=Modality.choices, blank=True, help_text="Imaging tests.")
    billable_service = models.ForeignKey(
        BillableService,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="lab_tests",
        help_text="The catalogue item an order with bill=true adds to the invoice.",
    )
    active = models.BooleanField(default=True, help_text="Inactive tests cannot be ordered.")

    class Meta:
        ordering = ["code"]
        verbose_name = "lab or imaging test"
        constraints = [
            models.CheckConstraint(condition=~Q(code=""), name="labtest_code_not_empty"),
            models.CheckConstraint(condition=Q(loinc_code__regex=r"^[0-9]{1,7}-[0-9]$"), name="labtest_loinc_format"),
            models.CheckConstraint(
                condition=Q(kind=TestKind.LAB, modality="") & ~Q(specimen_type="")
                | Q(kind=TestKind.IMAGING, specimen_type="", modality__in=Modality.values),
                name="labtest_specimen_or_modality",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.code} · {self.name}"


class ValueType(models.TextChoices):
    QUANTITY = "quantity"
    TEXT = "text"
    CODED = "coded"


class Analyte(models.Model):
    """What a lab test measures: one result per analyte. Quantities carry a UCUM unit and may have critical
    limits; coded values come from a list."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    test = models.ForeignKey(LabTest, on_delete=models.CASCADE, related_name="analytes")
    position = models.PositiveSmallIntegerField(default=0)
    code = models.CharField(max_length=30, help_text="e.g. HGB; unique within the test.")
    loinc_code = models.CharField("LOINC code", max_length=10)
    name = models.CharField(max_length=200)
    unit = models.CharField(max_length=30, blank=True, help_text="UCUM, e.g. g/dL, 10*3/uL, mg/dL.")
    value_type = models.CharField(max_length=10, choices=ValueType.choices, default=ValueType.QUANTITY)
    coded_values = ArrayField(
        models.CharField(max_length=60), default=list, blank=True, help_text="Coded analytes: the allowed values."
    )
    critical_low = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    critical_high = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)

    class Meta:
        ordering = ["test", "position", "code"]
        constraints = [
            models.UniqueConstraint(fields=["test", "code"], name="analyte_code_unique_per_test"),
            models.CheckConstraint(condition=Q(loinc_code__regex=r"^[0-9]{1,7}-[0-9]$"), name="analyte_loinc_format"),
            models.CheckConstraint(
                condition=~Q(value_type=ValueType.QUANTITY) | ~Q(unit=""), name="analyte_quantity_has_unit"
            ),
            models.CheckConstraint(
                condition=Q(value_type=ValueType.CODED) | Q(coded_values=[]), name="analyte_coded_values_only_if_coded"
            ),
            models.CheckConstraint(
                condition=Q(value_type=ValueType.QUANTITY) | Q(critical_low__isnull=True, critical_high__isnull=True),
                name="analyte_critical_limits_only_for_quantities",
            ),
            models.CheckConstraint(
                condition=Q(critical_low__isnull=True)
                | Q(critical_high__isnull=True)
                | Q(critical_low__lt=F("critical_high")),
                name="analyte_critical_low_below_high",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.code} ({self.unit})" if self.unit else self.code


class RangeSex(models.TextChoices):
    ANY = "any"
    MALE = "male"
    FEMALE = "female"


class ReferenceRange(models.Model):
    """The normal range of a quantity analyte for one sex (or any) and an age band [age_min_days,
    age_max_days) in days; an open end is null. Bands of one analyte and sex never overlap (an exclusion
    constraint); a band for `any` sex must not overlap a band of either sex (checked in the admin form)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    analyte = models.ForeignKey(Analyte, on_delete=models.CASCADE, related_name="ranges")
    sex = models.CharField(max_length=6, choices=RangeSex.choices, default=RangeSex.ANY)
    age_min_days = models.PositiveIntegerField(default=0, help_text="Inclusive.")
    age_max_days = models.PositiveIntegerField(null=True, blank=True, help_text="Exclusive; empty: no upper limit.")
    low = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    high = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)

    class Meta:
        ordering = ["analyte", "sex", "age_min_days"]
        constraints = [
            models.CheckConstraint(
                condition=Q(age_max_days__isnull=True) | Q(age_max_days__gt=F("age_min_days")),
                name="referencerange_age_band_not_empty",
            ),
            models.CheckConstraint(
                condition=~Q(low__isnull=True, high__isnull=True)
                & (Q(low__isnull=True) | Q(high__isnull=True) | Q(low__lte=F("high"))),
                name="referencerange_low_at_most_high",
            ),
            ExclusionConstraint(
                name="referencerange_no_overlap_per_sex",
                expressions=[
                    ("analyte", RangeOperators.EQUAL),
                    ("sex", RangeOperators.EQUAL),
                    (Func(F("age_min_days"), F("age_max_days"), function="int4range"), RangeOperators.OVERLAPS),
                ],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.analyte} {self.sex} {self.age_min_days}-{self.age_max_days or ''} days: {self.low}-{self.high}"


class OrderStatus(models.TextChoices):
    ORDERED = "ordered"
    COLLECTED = "collected"
    RESULTED = "resulted"
    FINAL = "final"
    CANCELLED = "cancelled"


class Priority(models.TextChoices):
    ROUTINE = "routine"
    URGENT = "urgent"
    STAT = "stat"


class LabOrderQuerySet(BranchScopedQuerySet["LabOrder"]):
    pass


class LabOrder(TimeStampedModel):
    """An order of one or more tests for a patient at a branch, numbered per branch and year
    (`BLR-LAB-2026-000123`) in the ordering transaction."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="lab_orders")
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="lab_orders")
    doctor = models.ForeignKey(Doctor, on_delete=models.PROTECT, related_name="lab_orders")
    appointment = models.ForeignKey(
        Appointment, on_delete=models.PROTECT, null=True, blank=True, related_name="lab_orders"
    )
    order_number = models.CharField(max_length=40, editable=False)
    priority = models.CharField(max_length=10, choices=Priority.choices, default=Priority.ROUTINE)
    clinical_notes = models.TextField(blank=True, max_length=2000)
    status = models.CharField(max_length=10, choices=OrderStatus.choices, default=OrderStatus.ORDERED)
    invoice = models.ForeignKey(
        Invoice, on_delete=models.PROTECT, null=True, blank=True, related_name="lab_orders", editable=False
    )
    ordered_by = models.CharField(max_length=200, blank=True, help_text='"api:<client>" or "staff:<user>".')
    collected_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancelled_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancellation_reason = models.CharField(max_length=500, blank=True, editable=False)

    objects = LabOrderQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [
            models.Index(F("created_at").desc(), "id", name="laborder_created_order"),  # the admin list
            # status and priority ride along so that a branch's list filtered by them counts its matches (the
            # X-Total-Count) from the index alone.
            models.Index(
                fields=["branch", "-created_at"], include=["status", "priority"], name="laborder_branch_created_cover"
            ),
            models.Index(fields=["patient", "-created_at"], name="laborder_patient_created"),
            models.Index(fields=["status", "-created_at"], name="laborder_status_created"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["branch", "order_number"], name="laborder_number_unique_per_branch"),
            models.CheckConstraint(condition=Q(status__in=OrderStatus.values), name="laborder_status_valid"),
            models.CheckConstraint(condition=Q(priority__in=Priority.values), name="laborder_priority_valid"),
            models.CheckConstraint(
                condition=~Q(status=OrderStatus.CANCELLED)
                | (Q(cancelled_at__isnull=False) & ~Q(cancellation_reason="")),
                name="laborder_cancelled_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return self.order_number


class ItemStatus(models.TextChoices):
    """Lab items: ordered -> collected -> resulted -> final; imaging items: scheduled -> in_progress ->
    completed; either -> cancelled with its order."""

    ORDERED = "ordered"
    COLLECTED = "collected"
    RESULTED = "resulted"
    FINAL = "final"
    SCHEDULED = "scheduled"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


# The imaging items a modality's worklist shows: due (scheduled) or started and not yet finished (so a
# modality that restarts mid-exam finds its step again). Completed and cancelled items never show.
WORKLIST_STATUSES = (ItemStatus.SCHEDULED, ItemStatus.IN_PROGRESS)


class LabOrderItemQuerySet(BranchScopedQuerySet["LabOrderItem"]):
    branch_path = "order__branch_id"


class LabOrderItem(models.Model):
    """One ordered test with its accession number (`BLR-26-0000123`: what the specimen label and the DICOM
    worklist show)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    order = models.ForeignKey(LabOrder, on_delete=models.PROTECT, related_name="items")
    position = models.PositiveSmallIntegerField(default=0)
    test = models.ForeignKey(LabTest, on_delete=models.PROTECT, related_name="order_items")
    accession_number = models.CharField(max_length=40, unique=True, editable=False)
    status = models.CharField(max_length=12, choices=ItemStatus.choices)
    # When the imaging procedure is due (the DICOM worklist's scheduled start): the order's time unless
    # staff move it. A database default, so rows written by a release that does not know the column get one.
    scheduled_at = models.DateTimeField(db_default=Now())
    # The Modality Performed Procedure Step that started the item (its SOP Instance UID): what the
    # modality's later N-SET names.
    mpps_instance_uid = models.CharField(max_length=64, blank=True, default="", db_default="", editable=False)

    objects = LabOrderItemQuerySet.as_manager()

    class Meta:
        ordering = ["order", "position", "id"]
        indexes = [
            # The DICOM worklist's range scan: the open imaging items by scheduled time.
            models.Index(
                fields=["scheduled_at"],
                condition=Q(status__in=WORKLIST_STATUSES),
                name="laborderitem_worklist",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["order", "test"], name="laborderitem_test_once_per_order"),
            models.CheckConstraint(condition=Q(status__in=ItemStatus.values), name="laborderitem_status_valid"),
            models.UniqueConstraint(
                fields=["mpps_instance_uid"], condition=~Q(mpps_instance_uid=""), name="laborderitem_mpps_uid_unique"
            ),
        ]

    def __str__(self) -> str:
        return self.accession_number

    @property
    def study_instance_uid(self) -> str:
        """An imaging item's Study Instance UID, `2.25.<its UUID as an integer>` (PS3.5 B.2: a UID derived from
        a UUID needs no registered root): the same in the worklist, in HL7 ORM ZDS-1 and on every server."""
        return study_instance_uid(self.id)


def study_instance_uid(item_id: uuid.UUID) -> str:
    return f"2.25.{item_id.int}"


ae_title_validator = RegexValidator(
    r"^[!-Z^-~][ -Z^-~]{0,15}$", "1 to 16 printable ASCII characters, no backslash (a DICOM AE title)."
)


class ImagingStation(models.Model):
    """The modality (a scanner's DICOM AE title) that performs a branch's imaging tests of one modality: the
    worklist's Scheduled Station AE Title of those items, and what a modality may query by."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="imaging_stations")
    modality = models.CharField(max_length=2, choices=Modality.choices)
    ae_title = models.CharField("AE title", max_length=16, validators=[ae_title_validator])
    name = models.CharField(
        max_length=100,
        blank=True,
        help_text="e.g. Room 2 CT scanner (the worklist's Scheduled Station Name, cut to 16).",
    )
    location = models.CharField(
        max_length=16, blank=True, help_text="The worklist's Scheduled Procedure Step Location, e.g. RAD-ROOM-2."
    )

    class Meta:
        ordering = ["branch", "modality"]
        verbose_name = "imaging station (DICOM modality)"
        verbose_name_plural = "imaging stations (DICOM modalities)"
        constraints = [
            models.UniqueConstraint(fields=["branch", "modality"], name="imagingstation_one_per_branch_modality"),
            models.CheckConstraint(condition=Q(modality__in=Modality.values), name="imagingstation_modality_valid"),
            models.CheckConstraint(
                condition=Q(ae_title__regex=r"^[!-Z^-~][ -Z^-~]{0,15}$"), name="imagingstation_ae_title_format"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.ae_title} ({self.modality})"


class Flag(models.TextChoices):
    NORMAL = "N"
    LOW = "L"
    HIGH = "H"
    CRITICAL_LOW = "LL"
    CRITICAL_HIGH = "HH"


CRITICAL_FLAGS = (Flag.CRITICAL_LOW.value, Flag.CRITICAL_HIGH.value)


class Comparator(models.TextChoices):
    """How a quantity relates to its number (HL7 SN, FHIR Quantity.comparator); empty: equal."""

    EQUAL = "", "="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


class ResultStatus(models.TextChoices):
    PRELIMINARY = "preliminary"
    FINAL = "final"
    AMENDED = "amended"


class LabResultQuerySet(BranchScopedQuerySet["LabResult"]):
    branch_path = "item__order__branch_id"


class LabResult(models.Model):
    """One version of the result of one analyte of an order item (or, with no analyte, an imaging report).
    A new version supersedes the current one; earlier versions are kept (never updated nor deleted but for
    the `current` flag)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    item = models.ForeignKey(LabOrderItem, on_delete=models.PROTECT, related_name="results")
    analyte = models.ForeignKey(Analyte, on_delete=models.PROTECT, null=True, blank=True, related_name="results")
    version = models.PositiveSmallIntegerField(default=1)
    current = models.BooleanField(default=True)
    status = models.CharField(max_length=12, choices=ResultStatus.choices)
    value_quantity = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    # An HL7 SN value (docs/operations.md §6): `>^14` is comparator ">" and 14; `^10^-^20` is 10 and high 20.
    comparator = models.CharField(max_length=2, choices=Comparator.choices, blank=True, default="", db_default="")
    value_quantity_high = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    value_text = models.TextField(blank=True, max_length=20000)
    unit = models.CharField(max_length=30, blank=True)
    flag = models.CharField(max_length=2, choices=Flag.choices, blank=True)
    reference_low = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    reference_high = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True)
    # What the performing laboratory reported beside the value (OBX-7 and OBX-8), kept as sent next to our own
    # interpretation (flag, reference_low/high), which may differ.
    reported_range = models.CharField(max_length=60, blank=True, default="", db_default="")
    reported_flag = models.CharField(max_length=20, blank=True, default="", db_default="")
    note = models.CharField(max_length=1000, blank=True)
    reason = models.CharField(max_length=500, blank=True, help_text="Why an amended result replaced the last one.")
    performed_at = models.DateTimeField()
    performer = models.CharField(max_length=200)
    recorded_at = models.DateTimeField(auto_now_add=True)
    recorded_by = models.CharField(max_length=200, blank=True)
    # A critical value (LL, HH) told to the doctor: who acknowledged it and when (lab.review). The one change a
    # kept version allows besides superseding it (the trigger of lab 0007); a version re-posting the same
    # critical value (verification) carries it over (lab.results).
    critical_acknowledged_by = models.CharField(max_length=200, blank=True, default="", db_default="")
    critical_acknowledged_at = models.DateTimeField(null=True, blank=True)
    # Who was told and how ("Dr Rao by phone, read back"): written with the acknowledgement, never after (0011).
    critical_acknowledgement_note = models.CharField(max_length=500, blank=True, default="", db_default="")

    objects = LabResultQuerySet.as_manager()

    class Meta:
        ordering = ["item", "analyte", "version"]
        indexes = [
            # FHIR Observation?patient= (integrations.fhir): a patient's current analyte results, counted and
            # paged newest first from the index alone (a patient with 500 orders has some 3,500).
            models.Index(
                fields=["item"],
                include=["performed_at", "id"],
                condition=Q(current=True, analyte__isnull=False),
                name="labresult_observation",
            ),
            # The unacknowledged critical values (the staff's list and dashboard): a handful among millions.
            models.Index(
                fields=["item"],
                condition=Q(current=True, flag__in=CRITICAL_FLAGS, critical_acknowledged_at__isnull=True),
                name="labresult_critical_open",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["item", "analyte", "version"], name="labresult_version_unique"),
            models.UniqueConstraint(
                fields=["item", "analyte"],
                condition=Q(current=True),
                name="labresult_one_current",
                nulls_distinct=False,
            ),
            models.CheckConstraint(condition=Q(status__in=ResultStatus.values), name="labresult_status_valid"),
            models.CheckConstraint(
                condition=~Q(status=ResultStatus.AMENDED) | ~Q(reason=""), name="labresult_amended_has_reason"
            ),
            models.CheckConstraint(
                condition=Q(value_quantity__isnull=False) | ~Q(value_text=""), name="labresult_has_a_value"
            ),
            models.CheckConstraint(condition=Q(comparator__in=Comparator.values), name="labresult_comparator_valid"),
            models.CheckConstraint(
                condition=Q(critical_acknowledged_at__isnull=True, critical_acknowledged_by="")
                | (
                    Q(critical_acknowledged_at__isnull=False, flag__in=CRITICAL_FLAGS) & ~Q(critical_acknowledged_by="")
                ),
                name="labresult_acknowledged_only_critical",
            ),
            models.CheckConstraint(
                condition=Q(value_quantity_high__isnull=True)
                | Q(comparator="", value_quantity__isnull=False, value_quantity_high__gte=F("value_quantity")),
                name="labresult_range_ordered",
            ),
        ]

    def __str__(self) -> str:
        value = self.value_quantity if self.value_quantity is not None else self.value_text[:30]
        return f"{self.analyte or 'report'} v{self.version}: {value} {self.unit}".strip()


class LabOrderCounter(BranchYearCounter):
    """The order number series."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["branch", "year"], name="laborder_counter_per_branch_year")]


class AccessionCounter(BranchYearCounter):
    """The accession number series (one per order item)."""

    class Meta:
        constraints = [models.UniqueConstraint(fields=["branch", "year"], name="accession_counter_per_branch_year")]
