"""Model instances from the rows of a constant statement (docs/architecture.md §6), on Django's public API:
the columns of a model in its field order, and `Model.from_db` over the values with the fields' own
`from_db_value` converters applied first, as the ORM applies them (an encrypted field's decryption, a JSON
field's decoding), so an instance built here is the one a queryset would have loaded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)


def columns(model: type[Model], alias: str) -> str:
    """The model's concrete columns under the table alias, in field order (what `loaded` takes)."""
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def width(model: type[Model]) -> int:
    return len(model._meta.concrete_fields)


def loaded(model: type[M], values: Sequence[Any]) -> M:
    """An instance of `model` from its columns' values, in the order `columns` gives them."""
    fields = model._meta.concrete_fields
    converted = []
    for field, value in zip(fields, values, strict=True):
        from_db_value = getattr(field, "from_db_value", None)
        converted.append(value if from_db_value is None or value is None else from_db_value(value, None, connection))
    return model.from_db(connection.alias, [field.attname for field in fields], converted)


def split(row: Sequence[Any], *models: type[Model]) -> list[Model]:
    """The row's instances of `models`, whose columns it holds one after the other."""
    made: list[Model] = []
    start = 0
    for model in models:
        made.append(loaded(model, row[start : start + width(model)]))
        start += width(model)
    return made
