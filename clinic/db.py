"""PostgreSQL helpers every app shares: the counter rows of gap-free number series, and reading which
constraint an IntegrityError violated.

A counter is a model with a `last_number` integer field and a UniqueConstraint over exactly the fields
that key one series (TokenCounter: doctor and local_date; InvoiceNumberCounter: branch and
financial_year). Its row is created on first use, so a series needs no setup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from django.db import IntegrityError, connection, models

COUNTER_FIELD = "last_number"


@cache
def _counter_sql(counter: type[models.Model], key: tuple[str, ...]) -> tuple[str, str, str]:
    """The upsert that takes a number, the insert that makes sure the row exists and the row lock, for one
    counter model keyed by `key` (field names). The key must be one of the model's unique constraints:
    it is the ON CONFLICT target."""
    meta = counter._meta
    unique = {
        frozenset(c.fields) for c in meta.constraints if isinstance(c, models.UniqueConstraint) and not c.condition
    }
    if frozenset(key) not in unique:
        raise ValueError(f"{meta.label} has no unique constraint on exactly {key}: it cannot key a counter.")
    quote = connection.ops.quote_name

    def column(name: str) -> str:
        field = meta.get_field(name)
        if not isinstance(field, models.Field) or not field.column:
            raise ValueError(f"{meta.label}.{name} is not a column.")
        return quote(field.column)

    table, number = quote(meta.db_table), column(COUNTER_FIELD)
    columns = ", ".join(column(name) for name in key)
    placeholders = ", ".join(["%s"] * len(key))
    where = " AND ".join(f"{column(name)} = %s" for name in key)
    take = (
        f"INSERT INTO {table} ({columns}, {number}) VALUES ({placeholders}, 1) "  # noqa: S608 - names are the model's
        f"ON CONFLICT ({columns}) DO UPDATE SET {number} = {table}.{number} + 1 RETURNING {number}"
    )
    ensure = (
        f"INSERT INTO {table} ({columns}, {number}) VALUES ({placeholders}, 0) "  # noqa: S608
        f"ON CONFLICT ({columns}) DO NOTHING"
    )
    lock = f"SELECT {number} FROM {table} WHERE {where} FOR UPDATE"  # noqa: S608
    return take, ensure, lock


def _key_values(key: Mapping[str, Any]) -> list[Any]:
    return [value.pk if isinstance(value, models.Model) else value for value in key.values()]


def counter_next(*, counter: type[models.Model], key: Mapping[str, Any]) -> int:
    """Take the next number of the series `key` names (1 for a new series) and return it.

    Must run inside the caller's transaction, the one that stores the number: the upsert leaves the counter
    row locked until that transaction ends, so concurrent takers of one series wait and are numbered in
    commit order, and a rollback gives the number back. The series has no gaps and no repeats.

    `key` maps the fields of the counter's unique constraint to the series' values; a model instance
    stands for its primary key:
    `counter_next(counter=TokenCounter, key={"doctor": doctor, "local_date": day})`.
    """
    take, _ensure, _lock = _counter_sql(counter, tuple(key))
    with connection.cursor() as cursor:
        cursor.execute(take, _key_values(key))
        row = cursor.fetchone()
    assert row is not None  # RETURNING always yields the row
    return int(row[0])


def counter_lock(*, counter: type[models.Model], key: Mapping[str, Any]) -> int:
    """Lock the counter row of the series `key` names until the caller's transaction ends, without taking a
    number (the row is created at 0 when missing), and return the last number taken.

    For writers that must be serialised with the series' takers: they wait for each other exactly as
    counter_next's callers do."""
    _take, ensure, lock = _counter_sql(counter, tuple(key))
    values = _key_values(key)
    with connection.cursor() as cursor:
        cursor.execute(ensure, values)
        cursor.execute(lock, values)
        row = cursor.fetchone()
    assert row is not None  # the row exists: inserted above or by an earlier transaction
    return int(row[0])


def violated_constraint(exc: BaseException) -> str | None:
    """The name of the constraint (or unique index) an IntegrityError violated, from PostgreSQL's error
    fields as psycopg reports them; None for any other error, or when the server named none."""
    if not isinstance(exc, IntegrityError):
        return None
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None)


def related_known(instance: models.Model, name: str, rows: Sequence[models.Model]) -> None:
    """Tell Django that `instance`'s related rows `name` (a reverse foreign key) are `rows`, as
    prefetch_related would after reading them, so that `instance.<name>.all()` runs no query. For a service
    that has just written those rows and hands the object to a representation."""
    manager = getattr(instance, name)
    cached = manager.model.objects.filter(pk__in=[row.pk for row in rows])
    cached._result_cache = list(rows)  # what django.db.models.query.prefetch_one_level stores
    cached._prefetch_done = True
    vars(instance).setdefault("_prefetched_objects_cache", {})[name] = cached
