"""The markers a representation (`<app>/representations.py`) annotates its TypedDicts with, for what a Python
type cannot say: a description (Doc), a string's format (Format, and the UUIDText, DateText and DateTimeText
aliases for text a builder writes itself), a decimal's precision (Number, Money), the labelled values of a
TextChoices (Choices), an integer's bounds (Range) and a field kept only for older clients (Deprecated).

They are plain values with no DRF in sight, so the domain core imports no interface (the layering rule);
clinic.api.shapes reads them to derive the OpenAPI components.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any


@dataclass(frozen=True)
class Doc:
    """The field's description in the OpenAPI document."""

    text: str


@dataclass(frozen=True)
class Deprecated:
    """A field kept in v1 for older clients, marked `deprecated: true` in the OpenAPI document; `use` names the
    field that replaces it (an older self-reference such as `order_id` replaced by `id`, docs/api-rules.md §1)."""

    use: str


@dataclass(frozen=True)
class Number:
    """A decimal sent as a JSON number with this precision (money is `Money`)."""

    max_digits: int
    decimal_places: int


Money = Number(max_digits=12, decimal_places=2)


class Format(Enum):
    EMAIL = "email"
    URI = "uri"
    # Text that a builder writes itself (a local time with its branch's offset, an id read as text from
    # SQL): the string is what goes on the wire, the format says what it holds.
    UUID = "uuid"
    DATE = "date"
    DATE_TIME = "date-time"


UUIDText = Annotated[str, Format.UUID]
DateText = Annotated[str, Format.DATE]
DateTimeText = Annotated[str, Format.DATE_TIME]


@dataclass(frozen=True)
class Choices:
    """A string enum with the values and labels of a Django `TextChoices` (a `Literal` has no labels)."""

    enum: type[Any]


@dataclass(frozen=True)
class Range:
    """Bounds of an integer or decimal field."""

    minimum: int | None = None
    maximum: int | None = None
