"""Serializer base classes shared by every app's API."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from clinic.errors import NotFound
from clinic.models import Branch, Doctor
from clinic.selectors import branch_visible_get
from clinic.states import state_resolve
from clinic.text import has_non_ascii_digit
from integrations.models import ApiClient

T = TypeVar("T")


class StrictSerializer(serializers.Serializer):
    """Rejects body fields it does not know (400 per unknown field): a typo must not silently do nothing.

    Nested StrictSerializers apply the rule at every level, so `address.pincod` is named as unknown.

    It also refuses non-ASCII digits in every field whose text is read as a number, a date or time, or a
    UUID (docs/api-rules.md §7): int(), Decimal, uuid.UUID and Django's \\d-based date patterns read
    Arabic-Indic or Devanagari digits as if they were 0-9, so a date written in Arabic-Indic digits was
    stored as if written in ASCII ones.
    """

    def to_internal_value(self, data: Any) -> Any:
        refused: dict[str, Any] = {}
        if isinstance(data, Mapping):
            writable = {name: field for name, field in self.fields.items() if not field.read_only}
            refused = _coded({key: ["Unknown field."] for key in data if key not in writable}, "unknown_field")
            refused.update(
                _coded(
                    {
                        key: [NON_ASCII_DIGITS]
                        for key, field in writable.items()
                        if _non_ascii_digits(field, data.get(key))
                    },
                    "invalid",
                )
            )
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if refused and isinstance(exc.detail, dict):
                exc.detail.update(refused)
            raise
        if refused:
            raise serializers.ValidationError(refused)
        return value


@dataclass(frozen=True)
class RequiredUnless:
    """A body rule: `required` fields must hold text (not blank) unless `field` is one of `exempt`.

    A serializer that declares one as `required_unless` checks it with `errors(data)` in its validation,
    and the OpenAPI document states it as one body schema per case, chosen by `field` (a oneOf with a
    discriminator, named `<exempt_name><Component>` and `<other_name><Component>`, clinic.api.schema): the
    form generated clients handle, where an if/then would be ignored."""

    field: str
    exempt: tuple[str, ...]
    required: tuple[str, ...]
    exempt_name: str
    other_name: str

    def errors(self, data: Any) -> dict[str, Any]:
        """The `required` fields left blank in `data` whose `field` is a value outside `exempt`."""
        if (
            not isinstance(data, Mapping)
            or not isinstance(data.get(self.field), str)
            or data[self.field] in self.exempt
        ):
            return {}
        value = data[self.field]
        message = f"Required for {value} (only {' or '.join(self.exempt)} may go without one)."
        return _coded({name: [message] for name in self.required if not str(data.get(name) or "").strip()}, "required")


NON_ASCII_DIGITS = "Digits must be ASCII 0-9."
# Fields that parse their text as a number, a date, a time or a UUID.
_PARSED_FIELDS = (
    serializers.DateField,
    serializers.DateTimeField,
    serializers.TimeField,
    serializers.DurationField,
    serializers.IntegerField,
    serializers.FloatField,
    serializers.DecimalField,
    serializers.UUIDField,
    serializers.RelatedField,
)


def _non_ascii_digits(field: serializers.Field, value: Any) -> bool:
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        return any(_non_ascii_digits(field.child, item) for item in value)
    return isinstance(field, _PARSED_FIELDS) and isinstance(value, str) and has_non_ascii_digit(value)


def _coded(messages: dict[str, list[str]], code: str) -> dict[str, Any]:
    return {key: [serializers.ErrorDetail(msg, code=code) for msg in msgs] for key, msgs in messages.items()}


class BoundedListField(serializers.ListField):
    """A list refused as too long before its items are validated. DRF's ListField validates every item first
    and checks max_length afterwards: a long list of bad items took seconds and answered a body many times
    its size, naming each of them."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class OffsetDateTimeField(serializers.DateTimeField):
    """An ISO 8601 datetime that must carry its UTC offset: a bare local time is ambiguous across branches."""

    default_error_messages = {"naive": "Include the UTC offset, e.g. 2026-11-23T09:00:00+05:30."}

    def to_internal_value(self, value: Any) -> Any:
        try:
            parsed = parse_datetime(value) if isinstance(value, str) else None
        except ValueError:
            # Well formed but impossible (Feb 30, hour 25, offset +25:00): the parent reports it as invalid.
            parsed = None
        if parsed is not None and parsed.tzinfo is None:
            self.fail("naive")
        return super().to_internal_value(value)


STATE_FORMS = (
    "An Indian state or union territory: its name (case and spacing ignored, & for and, official former names "
    "such as Orissa or Pondicherry accepted), its ISO 3166-2:IN code (IN-KA, case ignored) or its two-digit GST "
    "state code (29)."
)


class IndianStateField(serializers.CharField):
    """A state or union territory in any form clinic.states.state_resolve reads; the value is its canonical
    name. A JSON number is read as a GST state code (29, or 7 for "07")."""

    default_error_messages = {
        "invalid_choice": "Not an Indian state or union territory. Send its name (Karnataka), its ISO 3166-2:IN "
        "code (IN-KA) or its two-digit GST state code (29).",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", f"{STATE_FORMS} Stored and returned as the name.")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, int) and not isinstance(data, bool) and 0 <= data <= 99:
            data = f"{data:02d}"
        state = state_resolve(super().to_internal_value(data))
        if state is None:
            self.fail("invalid_choice")
        return str(state.value)


class AsciiDecimalField(serializers.DecimalField):
    """A decimal whose digits are ASCII only (docs/api-rules.md §7): Python's Decimal reads Arabic-Indic or
    Devanagari digits as numbers, which no integrator means to send and no receipt could show."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and has_non_ascii_digit(data):
            self.fail("invalid")
        return super().to_internal_value(data)


def client_of(field: serializers.Field) -> ApiClient:
    """The calling API client of a serializer (or of one of its fields) built with context={"client": ...}."""
    return field.context["client"]


def visible_branch(field: serializers.Field, branch_id: Any) -> Branch:
    """A branch_id of a body or query, as its branch: a 400 on the field unless the client may see it."""
    try:
        return branch_visible_get(client=client_of(field), branch_id=branch_id)
    except NotFound as exc:
        raise serializers.ValidationError(exc.detail) from None


class _NamesNothing:
    """What a list filter holds when the id it names is none the client may see (NAMES_NOTHING)."""

    def __repr__(self) -> str:
        return "NAMES_NOTHING"


# A list filter whose well-formed id names nothing the client may see: the list is empty, 200 (docs/api-rules.md
# §5.4), whether the id exists at another branch or nowhere: a 400 for one and [] for the other would tell which
# ids exist. clinic.api.pagination.HeaderPagination answers the empty page.
NAMES_NOTHING: Any = _NamesNothing()


def filter_visible(field: serializers.Field, read: Callable[..., T], **key: Any) -> T:
    """A list filter's row, read as `visible` reads it, or NAMES_NOTHING when the client may see no such row."""
    try:
        return read(client=client_of(field), **key)
    except NotFound:
        return cast(T, NAMES_NOTHING)


def filter_visible_branch(field: serializers.Field, branch_id: Any) -> Branch:
    """A list filter's branch_id, as its branch, or NAMES_NOTHING when the client may see no such branch."""
    return filter_visible(field, branch_visible_get, branch_id=branch_id)


def filter_branch_id(field: serializers.Field, branch_id: Any) -> Any:
    """A list filter's branch_id as the id of a branch the client may see, or NAMES_NOTHING."""
    branch = filter_visible_branch(field, branch_id)
    return branch if branch is NAMES_NOTHING else branch.id


def visible(field: serializers.Field, read: Callable[..., T], **key: Any) -> T:
    """Another domain's row named in a body or query (a lab order's patient, a prescription's appointment),
    read by its owning app's selector for the calling client, `read(client=..., **key)`: a 400 on the field,
    with the selector's message, when it answers NotFound. The apps share this, not each other's serializers."""
    try:
        return read(client=client_of(field), **key)
    except NotFound as exc:
        raise serializers.ValidationError(exc.detail) from None


def known_doctor(doctor_id: Any) -> Doctor:
    """A doctor_id of a body, as its doctor (any branch: the service checks the doctor works at the write's
    branch), or a 400 on the field."""
    doctor = Doctor.objects.filter(id=doctor_id).first()
    if doctor is None:
        raise serializers.ValidationError(f"No doctor {doctor_id}.")
    return doctor
