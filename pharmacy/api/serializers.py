"""Pharmacy request validation: the bodies and query parameters of docs/api-rules.md §14. References (patient,
branch, doctor, appointment, prescription, drug) are resolved here, field by field, through the client's
branch restriction, so one 400 names every bad field. The response bodies are pharmacy.representations'."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from appointments.models import Appointment
from appointments.selectors import appointment_visible_get
from clinic.api.serializers import (
    AsciiDecimalField,
    StrictSerializer,
    client_of,
    filter_branch_id,
    filter_visible,
    known_doctor,
    visible,
    visible_branch,
)
from clinic.errors import NotFound
from clinic.models import Branch, Doctor
from patients.models import Patient
from patients.selectors import patient_visible_get
from pharmacy import selectors
from pharmacy.models import MAX_QUANTITY, Drug, DrugForm, Prescription, PrescriptionStatus, Schedule
from pharmacy.services import MAX_ITEMS, DispenseItem, PrescribedItem, ReturnItem


@extend_schema_field({"type": "integer"})
class UnitsField(serializers.Field):
    """A whole number of units as a JSON integer: never a fraction (1.5), a string ("10", "1e9", Arabic-Indic digits) or a
    boolean; at most MAX_QUANTITY units either way."""

    default_error_messages = {
        "invalid": "A whole number of units (a JSON integer).",
        "min_value": "Must be at least {min_value}.",
        "nonzero": "Must not be zero.",
        "max_value": "At most {max_value} units.",
    }

    def __init__(self, *, signed: bool = False, **kwargs: Any) -> None:
        self.signed = signed
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        if self.signed and data == 0:
            self.fail("nonzero")
        if not self.signed and data < 1:
            self.fail("min_value", min_value=1)
        if abs(data) > MAX_QUANTITY:
            self.fail("max_value", max_value=MAX_QUANTITY)
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class OptionalBooleanField(serializers.BooleanField):
    """A boolean query filter that is absent unless sent (DRF reads a missing boolean of a query string as
    false)."""

    default_empty_html = serializers.empty


def _prescription_read(*, client: Any, ref: str) -> Prescription:
    return selectors.prescription_get(client=client, ref=ref)


def _prescription(serializer: serializers.Serializer, prescription_id: uuid.UUID) -> Prescription:
    try:
        return selectors.prescription_get(client=client_of(serializer), ref=str(prescription_id))
    except NotFound:
        raise serializers.ValidationError(f"No prescription {prescription_id} available to this client.") from None


class DrugCodeField(serializers.CharField):
    """A catalogue code (GET /api/v1/pharmacy/drugs) read as its drug; an unknown code is a 400 naming the
    field."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 30)
        kwargs.setdefault("help_text", "A drug code of the catalogue, e.g. PARA500.")
        super().__init__(**kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Drug:
        code = super().run_validation(data)  # the text's own checks (length, NUL) first
        preloaded: dict[str, Drug | None] = self.context.get("drugs", {})  # see drugs_preload
        drug = preloaded[code] if code in preloaded else Drug.objects.filter(code=code).first()
        if drug is None:
            raise serializers.ValidationError(f"No drug {code!r} in the catalogue.")
        return drug


def drugs_preload(serializer: serializers.Serializer, data: Any, key: str = "items") -> None:
    """Read the drugs of every item of a body in one query, for its DrugCodeFields (which would read one
    each): into the context, as a complete answer for those codes (one missing is not in the catalogue)."""
    items = data.get(key) if isinstance(data, dict) else None
    if isinstance(items, list):
        codes = {i["drug"].strip() for i in items if isinstance(i, dict) and isinstance(i.get("drug"), str)}
        codes = {code for code in codes if code and len(code) <= 30 and "\x00" not in code}
        if codes and len(codes) <= MAX_ITEMS:
            found = selectors.drugs_by_code(sorted(codes))
            context = serializer.context
            assert isinstance(context, dict)  # the dict the view passed, which the fields read
            context["drugs"] = {code: found.get(code) for code in codes}


# --- Catalogue and stock


class DrugListParams(serializers.Serializer):
    schedule = serializers.ChoiceField(choices=Schedule.choices, required=False)
    form = serializers.ChoiceField(choices=DrugForm.choices, required=False)
    search = serializers.CharField(
        required=False, max_length=100, help_text="Part of the code, generic or brand name (case ignored)."
    )


class StockListParams(serializers.Serializer):
    """Needs context={"client": ApiClient}."""

    branch_id = serializers.UUIDField(required=False, help_text="One of the branches the client may see.")
    drug = serializers.CharField(required=False, max_length=30, help_text="A drug code.")
    below_reorder = OptionalBooleanField(
        required=False, help_text="true: only drugs below their reorder level; false: only those not below."
    )
    expiring_before = serializers.DateField(
        required=False, help_text="Only drugs with a batch holding stock that expires before this date."
    )

    def validate_branch_id(self, value: uuid.UUID) -> uuid.UUID:
        return filter_branch_id(self, value)


class StockReceiptSerializer(StrictSerializer):
    """Needs context={"client": ApiClient}."""

    branch_id = serializers.UUIDField(required=False, help_text="Default: the client's only branch.")
    drug = DrugCodeField()
    batch_number = serializers.CharField(max_length=40)
    expiry_date = serializers.DateField(help_text="After today at the branch.")
    quantity = UnitsField(help_text=f"Units received, 1 to {MAX_QUANTITY}.")
    unit_cost = AsciiDecimalField(max_digits=12, decimal_places=2, min_value=0, coerce_to_string=False)
    mrp = AsciiDecimalField(
        max_digits=12, decimal_places=2, min_value=0, coerce_to_string=False, help_text="Per unit, as printed."
    )

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        return visible_branch(self, value)


class StockAdjustmentSerializer(StrictSerializer):
    branch_id = serializers.UUIDField(required=False, help_text="Default: the client's only branch.")
    drug = DrugCodeField()
    batch_number = serializers.CharField(max_length=40, help_text="A batch of the drug at the branch.")
    quantity = UnitsField(signed=True, help_text="Signed units: positive adds, negative removes; never 0.")
    reason = serializers.CharField(max_length=500, help_text="Why (a stock count, breakage...). Required.")

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        return visible_branch(self, value)


# --- Prescriptions


class PrescribedItemSerializer(StrictSerializer):
    drug = DrugCodeField()
    dose = serializers.CharField(max_length=50, help_text='e.g. "1 tablet".')
    frequency = serializers.CharField(max_length=50, help_text='e.g. "three times a day".')
    route = serializers.CharField(max_length=50, help_text='e.g. "oral".')
    duration_days = UnitsField(help_text="1 to 365.")
    quantity = UnitsField(help_text=f"Units to dispense in all, 1 to {MAX_QUANTITY}.")
    instructions = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")

    def validate_duration_days(self, value: int) -> int:
        if value > 365:
            raise serializers.ValidationError("From 1 to 365 days.")
        return value


class PrescriptionCreateSerializer(StrictSerializer):
    """Needs context={"client": ApiClient}."""

    patient_id = serializers.CharField(max_length=64, help_text="Patient UUID or patient_id (PAT-000123).")
    doctor_id = serializers.UUIDField(help_text="The prescribing doctor; must work at the branch.")
    branch_id = serializers.UUIDField(required=False, help_text="Default: the client's only branch.")
    appointment_id = serializers.UUIDField(
        required=False, allow_null=True, help_text="The patient's appointment at this branch it comes from."
    )
    items = PrescribedItemSerializer(many=True, min_length=1, max_length=MAX_ITEMS)  # type: ignore[call-arg]

    def to_internal_value(self, data: Any) -> Any:
        drugs_preload(self, data)
        return super().to_internal_value(data)

    def validate_patient_id(self, value: str) -> Patient:
        return visible(self, patient_visible_get, ref=value)

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        return visible_branch(self, value)

    def validate_doctor_id(self, value: uuid.UUID) -> Doctor:
        return known_doctor(value)

    def validate_appointment_id(self, value: uuid.UUID | None) -> Appointment | None:
        return None if value is None else visible(self, appointment_visible_get, appointment_id=value)

    def validate_items(self, value: list[dict[str, Any]]) -> list[PrescribedItem]:
        return [PrescribedItem(**item) for item in value]


class PrescriptionCancelSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=500, help_text="Why the prescription is cancelled (required).")


class _DatedListParams(serializers.Serializer):
    patient_id = serializers.CharField(
        required=False, max_length=64, help_text="Patient UUID or patient_id (PAT-000123)."
    )
    branch_id = serializers.UUIDField(required=False)
    date_from = serializers.DateField(required=False, help_text="Created on or after this day (branch-local).")
    date_to = serializers.DateField(required=False, help_text="Created on or before this day (branch-local).")

    def validate_patient_id(self, value: str) -> Patient:
        return filter_visible(self, patient_visible_get, ref=value)

    def validate_branch_id(self, value: uuid.UUID) -> uuid.UUID:
        return filter_branch_id(self, value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "date_from" in attrs and "date_to" in attrs and attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"date_to": "Must not be before date_from."})
        return attrs


class PrescriptionListParams(_DatedListParams):
    """Needs context={"client": ApiClient}."""

    status = serializers.ChoiceField(choices=PrescriptionStatus.choices, required=False)


# --- Dispenses


class DispenseItemSerializer(StrictSerializer):
    drug = DrugCodeField()
    quantity = UnitsField(help_text=f"Units, 1 to {MAX_QUANTITY}.")
    batch = serializers.CharField(
        max_length=40, required=False, help_text="A batch number at the branch; default: first expiry first out."
    )


class DispenseCreateSerializer(StrictSerializer):
    """Needs context={"client": ApiClient}."""

    branch_id = serializers.UUIDField(required=False, help_text="Default: the client's only branch.")
    prescription_id = serializers.UUIDField(
        required=False, allow_null=True, help_text="An active prescription of the branch to dispense against."
    )
    patient_id = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=64,
        help_text="Default: the prescription's patient; optional for an over-the-counter sale, required to bill it.",
    )
    items = DispenseItemSerializer(many=True, min_length=1, max_length=MAX_ITEMS)  # type: ignore[call-arg]
    bill = serializers.BooleanField(
        default=False, help_text="Add the drugs to the patient's open draft invoice at the branch (or a new one)."
    )

    def validate_patient_id(self, value: str | None) -> Patient | None:
        return None if value is None else visible(self, patient_visible_get, ref=value)

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        return visible_branch(self, value)

    def validate_prescription_id(self, value: uuid.UUID | None) -> Prescription | None:
        return None if value is None else _prescription(self, value)

    def to_internal_value(self, data: Any) -> Any:
        drugs_preload(self, data)
        return super().to_internal_value(data)

    def validate_items(self, value: list[dict[str, Any]]) -> list[DispenseItem]:
        return [DispenseItem(drug=i["drug"], quantity=i["quantity"], batch_number=i.get("batch")) for i in value]


class DispenseListParams(_DatedListParams):
    """Needs context={"client": ApiClient}."""

    prescription_id = serializers.UUIDField(required=False)

    def validate_prescription_id(self, value: uuid.UUID) -> Prescription:
        return filter_visible(self, _prescription_read, ref=str(value))


class ReturnLineSerializer(StrictSerializer):
    line_id = serializers.UUIDField(help_text="A line of this dispense.")
    quantity = UnitsField(help_text="Units brought back; at most those dispensed on the line less those returned.")


class DispenseReturnSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=500, help_text="Why the drugs come back (required).")
    lines = ReturnLineSerializer(many=True, min_length=1, max_length=MAX_ITEMS)  # type: ignore[call-arg]

    def validate_lines(self, value: list[dict[str, Any]]) -> list[ReturnItem]:
        return [ReturnItem(**line) for line in value]
