"""OpenAPI components derived from the typed representations of the apps (`<app>/representations.py`).

A response shape is declared once, as the `TypedDict` its builder returns; `shape(PatientProfile)` turns it
into the serializer drf-spectacular documents as the `PatientProfile` component (nested TypedDicts become
their own components, named after their class). Python types map to JSON Schema the obvious way; what a
type cannot say is added with `Annotated` metadata:

    phone: Annotated[str, Doc("E.164")]
    email: Annotated[str | None, Format.EMAIL]
    total: Annotated[Decimal, Money]                  # a JSON number with two decimal places
    status: Literal["booked", "cancelled"]            # an enum
    state: Annotated[str, Choices(IndianState)]       # an enum of a TextChoices, documented with its labels
    status: Annotated[str, Invoice.Status]            # the same, for a model's own choices
    by_mode: dict[str, Annotated[Decimal, Money]]     # an object whose values all have this shape
    registered_at: DateTimeText                       # a value the builder already wrote as ISO text

`X | None` is nullable; `NotRequired[...]` keys may be absent. The markers live in clinic.lib.shapes, which
imports no DRF, so that representations do not depend on the API package.
"""

from __future__ import annotations

import datetime
import types
import uuid
from decimal import Decimal
from functools import cache
from typing import Annotated, Any, Literal, NotRequired, Required, Union, cast, get_args, get_origin, get_type_hints

from django.db.models import Choices as DjangoChoices
from drf_spectacular.utils import extend_schema_serializer, inline_serializer
from rest_framework import serializers

from clinic.lib.shapes import Choices, Deprecated, Doc, Format, Money, Number, Range

_TEXT_FIELDS: dict[Format, type[serializers.Field]] = {
    Format.UUID: serializers.UUIDField,
    Format.DATE: serializers.DateField,
    Format.DATE_TIME: serializers.DateTimeField,
}


def _unwrap(hint: Any) -> tuple[Any, list[Any], bool]:
    """(the bare type, its Annotated metadata, whether None is allowed)."""
    metadata: list[Any] = []
    nullable = False
    while True:
        origin = get_origin(hint)
        if origin is Annotated:
            hint, *extra = get_args(hint)
            metadata.extend(extra)
        elif origin in (NotRequired, Required):
            hint = get_args(hint)[0]
        elif origin in (Union, types.UnionType) and type(None) in get_args(hint):
            rest = [arg for arg in get_args(hint) if arg is not type(None)]
            nullable = True
            hint = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007 - built at run time
        else:
            return hint, metadata, nullable


def _field(hint: Any, *, required: bool) -> serializers.Field:
    bare, metadata, nullable = _unwrap(hint)
    kwargs: dict[str, Any] = {"required": required}
    if nullable:
        kwargs["allow_null"] = True
    for item in metadata:
        if isinstance(item, Doc):
            kwargs["help_text"] = item.text
        elif isinstance(item, Deprecated):
            kwargs["help_text"] = f"Deprecated: the same value as `{item.use}`, kept for v1 clients."
    formats = {item for item in metadata if isinstance(item, Format)}
    bounds = next((item for item in metadata if isinstance(item, Range)), None)
    if bounds is not None:
        if bounds.minimum is not None:
            kwargs["min_value"] = bounds.minimum
        if bounds.maximum is not None:
            kwargs["max_value"] = bounds.maximum
    choices = next((item.enum for item in metadata if isinstance(item, Choices)), None) or next(
        (item for item in metadata if isinstance(item, type) and issubclass(item, DjangoChoices)), None
    )
    if choices is not None:
        # Labels and all: the same enum (and component name, ENUM_NAME_OVERRIDES) as the model field's.
        return serializers.ChoiceField(choices=choices.choices, **kwargs)
    origin = get_origin(bare)
    if origin is list:
        (item_hint,) = get_args(bare)
        item_bare = _unwrap(item_hint)[0]
        if isinstance(item_bare, type) and _is_typeddict(item_bare):
            return shape(item_bare, many=True, **kwargs)
        return serializers.ListField(child=_field(item_hint, required=True), **kwargs)
    if origin is dict or bare is dict:
        if get_args(bare):
            kwargs["child"] = _field(get_args(bare)[1], required=True)
        return serializers.DictField(**kwargs)
    if origin is Literal:
        return serializers.ChoiceField(choices=list(get_args(bare)), **kwargs)
    if isinstance(bare, type) and _is_typeddict(bare):
        return shape(bare, **kwargs)
    if bare is Decimal:
        number = next((item for item in metadata if isinstance(item, Number)), Money)
        return serializers.DecimalField(
            max_digits=number.max_digits, decimal_places=number.decimal_places, coerce_to_string=False, **kwargs
        )
    simple: dict[Any, type[serializers.Field]] = {
        bool: serializers.BooleanField,
        int: serializers.IntegerField,
        float: serializers.FloatField,
        uuid.UUID: serializers.UUIDField,
        datetime.datetime: serializers.DateTimeField,
        datetime.date: serializers.DateField,
        datetime.time: serializers.TimeField,
    }
    if bare in simple:
        return simple[bare](**kwargs)
    if bare is str:
        if Format.EMAIL in formats:
            return serializers.EmailField(**kwargs)
        if Format.URI in formats:
            return serializers.URLField(**kwargs)
        text_format = next(iter(formats & _TEXT_FIELDS.keys()), None)
        if text_format is not None:
            return _TEXT_FIELDS[text_format](**kwargs)
        return serializers.CharField(**kwargs)
    raise TypeError(f"No OpenAPI mapping for {hint!r}.")


def _is_typeddict(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, dict) and hasattr(cls, "__required_keys__")


@cache
def _component(typed_dict: type) -> type[serializers.Serializer]:
    hints = get_type_hints(typed_dict, include_extras=True)
    required = cast(Any, typed_dict).__required_keys__
    fields = {name: _field(hint, required=name in required) for name, hint in hints.items()}
    serializer = inline_serializer(typed_dict.__name__, fields).__class__
    deprecated = [name for name, hint in hints.items() if any(isinstance(m, Deprecated) for m in _unwrap(hint)[1])]
    if deprecated:
        serializer = extend_schema_serializer(deprecate_fields=deprecated)(serializer)
    doc = typed_dict.__doc__
    if doc and doc.strip() and not doc.startswith(typed_dict.__name__ + "("):
        cast(Any, serializer).openapi_description = " ".join(doc.split())
    return serializer


def shape(typed_dict: type, *, many: bool = False, **kwargs: Any) -> Any:
    """The serializer instance that documents `typed_dict` (as a component named after it)."""
    return _component(typed_dict)(many=many, **kwargs)
