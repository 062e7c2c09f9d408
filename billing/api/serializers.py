"""Billing request validation: the invoice, payment and query-parameter serializers (docs/api-rules.md §11). The
response bodies are built by billing.representations."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import date
from decimal import Decimal
from typing import Any

from rest_framework import serializers

from billing import services
from billing.models import Invoice, Payment
from clinic.api.serializers import (
    AsciiDecimalField,
    RequiredUnless,
    StrictSerializer,
    filter_branch_id,
    filter_visible,
    visible,
    visible_branch,
)
from clinic.errors import FieldError
from clinic.lib import tax
from clinic.models import Branch
from patients.models import Patient
from patients.selectors import patient_visible_get

MAX_LINE_ITEMS = 100
MAX_QUANTITY = Decimal(10000)
MAX_RATE = Decimal(10_000_000)


def _money(**kwargs: Any) -> AsciiDecimalField:
    return AsciiDecimalField(max_digits=12, decimal_places=2, **kwargs)


class LineItemInputSerializer(StrictSerializer):
    service_code = serializers.CharField(
        max_length=30,
        required=False,
        help_text="A catalogue code: name, department, rate and tax_rate default from it.",
    )
    service_name = serializers.CharField(max_length=200, required=False, help_text="Required without service_code.")
    department = serializers.CharField(
        max_length=100, required=False, help_text="Department name or UUID; required without service_code."
    )
    quantity = AsciiDecimalField(
        max_digits=10,
        decimal_places=3,
        required=False,
        max_value=MAX_QUANTITY,
        help_text="Default 1; fractions allowed (0.5), up to 3 places.",
    )
    rate = _money(required=False, min_value=Decimal(0), max_value=MAX_RATE, help_text="Price per unit before tax.")
    discount = _money(required=False, min_value=Decimal(0), help_text="Rupees off the line; at most quantity x rate.")
    tax_rate = AsciiDecimalField(
        max_digits=5,
        decimal_places=2,
        required=False,
        min_value=Decimal(0),
        max_value=Decimal(100),
        help_text="GST percent: 0 for exempt, nil-rated and zero-rated lines, else one of 0.25, 3, 5, 12, 18, 28, "
        "40; required without service_code.",
    )
    tax_category = serializers.ChoiceField(
        choices=tax.TaxCategory.values,
        required=False,
        help_text="Default: the catalogue entry's (unless tax_rate is sent); else exempt for tax_rate 0 and "
        "taxable otherwise.",
    )
    hsn_sac = serializers.RegexField(
        tax.HSN_SAC_PATTERN,
        required=False,
        help_text="SAC (services) or HSN (goods) code, 4, 6 or 8 digits. Default: the catalogue entry's.",
        error_messages={"invalid": "Must be 4, 6 or 8 digits (0-9)."},
    )

    def validate_quantity(self, value: Decimal) -> Decimal:
        if value <= 0:
            raise serializers.ValidationError("Must be greater than 0.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("service_code") and not attrs.get("service_name"):
            raise serializers.ValidationError({"service_name": "Send service_name, or a catalogue service_code."})
        return attrs


def _resolve_lines(items: list[dict[str, Any]]) -> list[services.LineInput]:
    """Catalogue codes, departments and discounts of the lines, as errors nested per line (line_items.1.discount)."""
    try:
        return services.line_inputs_resolve(items)
    except FieldError as exc:
        nested: list[dict[str, list[str]]] = [{} for _ in items]
        for key, message in exc.errors.items():
            _, index, field = key.split(".", 2)
            nested[int(index)][field] = [message]
        raise serializers.ValidationError(nested) from None


class InvoiceCreateSerializer(StrictSerializer):
    """The create body. Its references are resolved here, field by field, so one 400 names every bad field
    (a line's unknown service_code together with a malformed date). Needs context={"client": ApiClient}."""

    patient_id = serializers.CharField(max_length=64, help_text="Patient UUID or patient_id (PAT-000123).")
    branch_id = serializers.UUIDField(required=False, help_text="Default: the client's only branch.")
    date = serializers.DateField(
        required=False,
        help_text="Default: today at the branch; not in the future, nor before 1 April of the previous financial year.",
    )
    line_items = LineItemInputSerializer(many=True, min_length=1, max_length=MAX_LINE_ITEMS)  # type: ignore[call-arg]
    finalize = serializers.BooleanField(default=False, help_text="Finalize at once (assigns the number).")

    def validate_patient_id(self, value: str) -> Patient:
        patient = visible(self, patient_visible_get, ref=value)
        if not patient.is_active:
            raise serializers.ValidationError("This patient record is inactive (merged or erroneous).")
        return patient

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        branch = visible_branch(self, value)
        if not branch.is_active:
            raise serializers.ValidationError(f"The branch {branch.code} is closed.")
        return branch

    def validate_line_items(self, value: list[dict[str, Any]]) -> list[services.LineInput]:
        return _resolve_lines(value)


class InvoiceUpdateSerializer(StrictSerializer):
    date = serializers.DateField(
        required=False, help_text="Not in the future, nor before 1 April of the previous financial year."
    )
    line_items = LineItemInputSerializer(  # type: ignore[call-arg]
        many=True, min_length=1, max_length=MAX_LINE_ITEMS, required=False, help_text="Replaces every line."
    )

    def validate_line_items(self, value: list[dict[str, Any]]) -> list[services.LineInput]:
        return _resolve_lines(value)


class CancelSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=500, help_text="Why the invoice is cancelled (required).")


class EmptyBody(StrictSerializer):
    """finalize takes no body; a stray field is refused like everywhere else."""


# The modes a payment or refund may go without a reference in, and those that need one: each is the enum of
# its own body schema in the OpenAPI document (settings.SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]).
PAYMENT_MODES: tuple[str, ...] = tuple(Payment.Mode.values)
CASH_MODES: tuple[str, ...] = (Payment.Mode.CASH.value,)
REFERENCED_MODES: tuple[str, ...] = tuple(mode for mode in Payment.Mode.values if mode not in CASH_MODES)


class _MoneyMovementSerializer(StrictSerializer):
    """What a payment and a refund request share: amount, mode and reference (required for every mode but
    cash). `today` in the context is the branch-local date, which the date field may not pass."""

    required_unless = RequiredUnless(
        field="payment_mode",
        exempt=CASH_MODES,
        required=("reference",),
        exempt_name="Cash",
        other_name="Referenced",
    )
    payment_mode = serializers.ChoiceField(choices=Payment.Mode.values)
    reference = serializers.CharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="External transaction reference; required for every mode but cash.",
    )

    def validate_amount(self, value: Decimal) -> Decimal:
        if value <= 0:
            raise serializers.ValidationError("Must be greater than 0.")
        return value

    def _not_in_future(self, value: date) -> date:
        today = self.context.get("today")
        if today is not None and value > today:
            raise serializers.ValidationError(f"Cannot be in the future (today is {today} at this branch).")
        return value

    def to_internal_value(self, data: Any) -> Any:
        # The reference rule is checked even when other fields are bad, so one 400 names every bad field.
        errors: dict[str, Any] = {}
        value = None
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not isinstance(exc.detail, dict):
                raise
            errors = dict(exc.detail)
        if isinstance(data, Mapping) and data.get("payment_mode") in Payment.Mode.values and "reference" not in errors:
            errors.update(self.required_unless.errors(data))
        if errors:
            raise serializers.ValidationError(errors)
        return value


class PaymentSerializer(_MoneyMovementSerializer):
    """The payment record request."""

    amount = AsciiDecimalField(max_digits=14, decimal_places=2, help_text="> 0 and at most the balance.")
    payment_date = serializers.DateField(required=False, help_text="Default: today at the branch; not in the future.")

    def validate_payment_date(self, value: date) -> date:
        return self._not_in_future(value)


class RefundSerializer(_MoneyMovementSerializer):
    """The refund request."""

    amount = AsciiDecimalField(
        max_digits=14, decimal_places=2, help_text="> 0 and at most what was paid and not yet refunded."
    )
    refund_date = serializers.DateField(
        required=False, help_text="Default: today at the branch; not in the future nor before the invoice date."
    )

    def validate_refund_date(self, value: date) -> date:
        return self._not_in_future(value)


class CreditLineSerializer(StrictSerializer):
    line_id = serializers.UUIDField(help_text="A line of this invoice (its `line_items[].id`).")
    quantity = AsciiDecimalField(
        max_digits=10,
        decimal_places=3,
        required=False,
        min_value=Decimal("0.001"),
        help_text="Units to credit, at the line's net price per unit.",
    )
    amount = AsciiDecimalField(
        max_digits=14,
        decimal_places=2,
        required=False,
        min_value=Decimal("0.01"),
        help_text="Taxable value to credit, in rupees before tax; the line's GST is reversed on top of it.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "quantity" in attrs and "amount" in attrs:
            raise serializers.ValidationError({"amount": "Send quantity or amount, not both."})
        return attrs


class CreditNoteSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=500, help_text="Why the invoice is credited (required).")
    lines = CreditLineSerializer(  # type: ignore[call-arg]
        many=True,
        min_length=1,
        max_length=services.MAX_CREDIT_LINES,
        help_text="The lines to credit; a line with neither quantity nor amount is credited in full (all that "
        "earlier credit notes left of it).",
    )

    def validate_lines(self, value: list[dict[str, Any]]) -> list[services.CreditLineInput]:
        return [services.CreditLineInput(**line) for line in value]


class InvoiceListParams(serializers.Serializer):
    """The list's filters; patient and branch are looked up here so one 400 names every bad parameter.
    Needs context={"client": ApiClient}."""

    patient_id = serializers.CharField(
        required=False, max_length=64, help_text="Patient UUID or patient_id (PAT-000123)."
    )
    status = serializers.ChoiceField(choices=Invoice.Status.choices, required=False)
    date_from = serializers.DateField(required=False, help_text="Invoices dated on or after this day.")
    date_to = serializers.DateField(required=False, help_text="Invoices dated on or before this day.")
    branch_id = serializers.UUIDField(required=False)

    def validate_patient_id(self, value: str) -> Patient:
        return filter_visible(self, patient_visible_get, ref=value)

    def validate_branch_id(self, value: uuid.UUID) -> uuid.UUID:
        return filter_branch_id(self, value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "date_from" in attrs and "date_to" in attrs and attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"date_to": "Must not be before date_from."})
        return attrs


class SummaryParams(serializers.Serializer):
    """Needs context={"client": ApiClient}."""

    date_from = serializers.DateField(help_text="First invoice and payment date (inclusive).")
    date_to = serializers.DateField(help_text="Last invoice and payment date (inclusive).")
    branch_id = serializers.UUIDField(required=False, help_text="Only this branch.")

    def validate_branch_id(self, value: uuid.UUID) -> uuid.UUID:
        return visible_branch(self, value).id

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"date_to": "Must not be before date_from."})
        return attrs
