"""Querysets compiled once, run many times, and the server-binding cursor: kept where they earned it.

Everything else reads through the ORM (docs/architecture.md §6, the plan policy). What is here rests on
Django internals (the compiler's select list, `get_related_populators`, the fields' converters), so a Django
upgrade starts with this module's tests (README, "Upgrading Django"). Its users:

- `server_binding_cursor`: the bearer-token lookup (clinic.api.bearer), the audit insert (clinic.api.audit)
  and the billing summary's one statement, on every request or on the summary's; PostgreSQL prepares each
  once per connection (psycopg's automatic preparation).
- `QueryPlan` and `UpdatePlan`: the lab results path, which every HL7 ORU message and REST results post runs
  (lab.results: the analytes, ranges and current versions, the two status writes; lab.selectors: the item
  by accession number at the sender's branches, the order's detail for its event; lab.locks: the order's
  lock), and the booking path's two slot reads (appointments.slots). bench/results/plans_retired.md has
  the measurement that kept them: the ORM put the HL7 ingest far below its target.

A QueryPlan builds its queryset once with `Slot` placeholders where the values go, compiles it once per
database connection, and on every call substitutes the values and builds the model instances as the ORM's
own iterator does (`from_db`, select_related populators, the fields' converters). It does not prefetch, nor
load deferred fields or values(). A Slot stands for one value (the right-hand side of an exact, comparison or
`contains` lookup).

    sessions = QueryPlan(lambda: WeeklySession.objects.filter(doctor_id=Slot("doctor", UUIDField())))
    sessions.fetch(doctor=doctor.pk)  # -> list[WeeklySession]
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.models import Expression, Field, Lookup, Model, QuerySet
from django.db.models.fields.related_descriptors import ManyToManyDescriptor
from django.db.models.query import get_related_populators
from django.db.models.sql import UpdateQuery
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=Model)


class Slot(Expression):
    """Where a plan's parameter goes: compiles to one placeholder whose value `QueryPlan.fetch` supplies."""

    def __init__(self, name: str, output_field: Field) -> None:
        super().__init__(output_field=output_field)
        self.name = name

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        return "%s", [self]

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class AnyOf(Lookup):
    """`lhs = ANY(rhs)`: membership in an array, the `__in` of a plan (whose IN list would change its SQL
    with its length). Used as an expression: `.filter(AnyOf(F("id"), Slot("ids", ArrayField(UUIDField()))))`."""

    lookup_name = "any_of"

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", (*lhs_params, *rhs_params)


@dataclass(frozen=True)
class _Compiled:
    """One plan compiled for one connection: everything the ORM's ModelIterable derives from the compiler."""

    sql: str
    params: tuple[Any, ...]
    model: type[Model]
    fields_start: int
    fields_end: int
    init_list: list[str]
    populators: list[Any]
    converters: list[tuple[int, list[Any], Any]]
    annotations: dict[str, int]
    for_update: bool


class QueryPlan(Generic[M]):
    """The queryset `build` returns, compiled once per connection (from a fresh `build()` each time: compiling
    mutates a Query) and run with `fetch(**values)` or `rows(**values)`. `build` must be pure; the first
    queryset it returns is kept as a template, read only for its database alias and its prefetch check."""

    def __init__(self, build: Callable[[], QuerySet[M]]) -> None:
        self._build = build
        self._queryset: QuerySet[M] | None = None
        self._lock = threading.Lock()
        # Per connection object: Django gives each thread its own, and a compiler holds its connection.
        self._compiled: weakref.WeakKeyDictionary[Any, _Compiled] = weakref.WeakKeyDictionary()

    def _template(self) -> QuerySet[M]:
        if self._queryset is None:
            with self._lock:
                if self._queryset is None:
                    queryset = self._build()
                    if getattr(queryset, "_prefetch_related_lookups", ()):
                        raise ValueError("A QueryPlan does not prefetch: give the related rows a plan of their own.")
                    self._queryset = queryset
        return self._queryset

    def _compile(self, queryset: QuerySet[M], connection: Any) -> _Compiled:
        compiler = queryset.query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        select, klass_info = compiler.select, compiler.klass_info
        fields = [column[0] for column in select[: compiler.col_count]]
        converters = [(pos, convs, expression) for pos, (convs, expression) in compiler.get_converters(fields).items()]
        if klass_info is None:  # values_list(): rows only
            model, start, end, init_list, populators = queryset.model, 0, 0, [], []
        else:
            model = klass_info["model"]
            start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
            init_list = [column[0].target.attname for column in select[start:end]]
            # Django 5.2's signature (the stubs follow 6.0, which adds fetch_mode).
            populators = get_related_populators(klass_info, select, connection.alias)  # type: ignore[call-arg]
        return _Compiled(
            sql=sql,
            params=tuple(params),
            model=model,
            fields_start=start,
            fields_end=end,
            init_list=init_list,
            populators=populators,
            converters=converters,
            annotations=dict(compiler.annotation_col_map or {}),
            for_update=bool(queryset.query.select_for_update),
        )

    def fetch(self, using: str | None = None, **values: Any) -> list[M]:
        """The rows for these slot values, as model instances. Raises KeyError naming a slot not given."""
        compiled, alias, connection, rows = self._run(using, values)
        return _instances(compiled, rows, alias, connection)

    def rows(self, using: str | None = None, **values: Any) -> list[list[Any]]:
        """The rows of a values_list() plan (a union of them too) for these slot values, converted."""
        compiled, _, connection, rows = self._run(using, values)
        return [_converted(compiled, raw, connection) for raw in rows]

    def _run(self, using: str | None, values: dict[str, Any]) -> tuple[_Compiled, str, Any, list[Any]]:
        queryset = self._template()
        alias = using or queryset.db or DEFAULT_DB_ALIAS
        connection = connections[alias]
        compiled = self._compiled.get(connection)
        if compiled is None:
            # From a queryset of its own: the ORM mutates a Query while compiling it (its table aliases), so
            # threads compiling the template itself at once could join or select through each other's aliases.
            compiled = self._compiled[connection] = self._compile(self._build(), connection)
        if compiled.for_update and connection.get_autocommit():
            # What the ORM checks when it compiles (here, once): a row lock outside a transaction ends at once.
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        params = _bound(compiled.params, values, connection)
        with server_binding_cursor(connection) as cursor:
            cursor.execute(compiled.sql, params)
            return compiled, alias, connection, cursor.fetchall()


def _bound(params: Iterable[Any], values: Mapping[str, Any], connection: Any) -> list[Any]:
    """The compiled parameters with each Slot replaced by its value, prepared as its field prepares it."""
    return [
        param.output_field.get_db_prep_value(values[param.name], connection) if isinstance(param, Slot) else param
        for param in params
    ]


class UpdatePlan:
    """An UPDATE of one table compiled once per connection:
    `UpdatePlan(lambda: LabOrder.objects.filter(pk=Slot("order", UUIDField())), status=Slot("status", CharField()))`
    then `.execute(order=..., status=...)`, which returns the number of rows updated. Like QuerySet.update() it
    sends no signals and sets no auto_now field: give such a field a Slot of its own."""

    def __init__(self, build: Callable[[], QuerySet[Any]], **assignments: Any) -> None:
        self._build = build
        self._assignments = assignments
        self._compiled: weakref.WeakKeyDictionary[Any, tuple[str, tuple[Any, ...]]] = weakref.WeakKeyDictionary()

    def _compile(self, connection: Any) -> tuple[str, tuple[Any, ...]]:
        query = cast(UpdateQuery, self._build().query.chain(UpdateQuery))
        query.add_update_values(self._assignments)
        query.get_initial_alias()
        # With a join (or a parent table) the ORM would first SELECT the matching keys and update by them:
        # compiled once, those keys would be frozen into the statement.
        if getattr(query, "related_updates", None) or query.count_active_tables() != 1:
            raise ValueError("An UpdatePlan filters and updates its own table only.")
        sql, params = query.get_compiler(connection=connection).as_sql()
        return sql, tuple(params)

    def execute(self, using: str = DEFAULT_DB_ALIAS, **values: Any) -> int:
        connection = connections[using]
        compiled = self._compiled.get(connection)
        if compiled is None:
            compiled = self._compiled[connection] = self._compile(connection)
        sql, params = compiled
        with server_binding_cursor(connection) as cursor:
            cursor.execute(sql, _bound(params, values, connection))
            return int(cursor.rowcount)


def server_binding_cursor(connection: Any) -> Any:
    """A cursor of `connection` (through Django: health check, time zone, query logging, execute wrappers)
    that sends the parameters apart from the SQL instead of quoting them into it, so PostgreSQL can prepare
    a plan's statement once per connection (psycopg prepares a statement run `prepare_threshold` times; the
    setting is None behind PgBouncer's transaction pooling, where nothing may outlive a transaction)."""
    connection.ensure_connection()
    raw = connection.connection
    previous = raw.cursor_factory
    # The connection is this thread's own (Django's connections are per thread): swapping its factory for
    # one cursor cannot race with another thread.
    raw.cursor_factory = ServerBindingCursor
    try:
        return connection.cursor()
    finally:
        raw.cursor_factory = previous


def _instances(compiled: _Compiled, rows: Iterable[Any], alias: str, connection: Any) -> list[Any]:
    """What django.db.models.query.ModelIterable does with each row."""
    objects = []
    start, end = compiled.fields_start, compiled.fields_end
    for raw in rows:
        row = _converted(compiled, raw, connection)
        obj = compiled.model.from_db(alias, compiled.init_list, row[start:end])
        for populator in compiled.populators:
            populator.populate(row, obj)
        for name, pos in compiled.annotations.items():
            setattr(obj, name, row[pos])
        objects.append(obj)
    return objects


def _converted(compiled: _Compiled, raw: Any, connection: Any) -> list[Any]:
    row = list(raw)
    for pos, convs, expression in compiled.converters:
        value = row[pos]
        for convert in convs:
            value = convert(value, expression, connection)
        row[pos] = value
    return row


def prefetched(instance: Model, relation: str, objects: list[Any]) -> None:
    """Attach `objects` as what `instance.<relation>.all()` returns (a reverse foreign key or a forward
    many-to-many), as prefetch_related does: the related manager's own queryset holding them, so that a
    filter or get() on the relation still queries within it (the filter is built, not compiled, here)."""
    descriptor = getattr(type(instance), relation)
    rel = descriptor.rel
    if isinstance(descriptor, ManyToManyDescriptor):
        if descriptor.reverse:
            raise ValueError(f"{relation} is the reverse of a many-to-many: not supported.")
        name = rel.field.name
    else:
        name = rel.cache_name
        for obj in objects:  # each object's own foreign key points back at `instance`, as prefetch_related sets
            rel.field.set_cached_value(obj, instance)
    cache = instance.__dict__.setdefault("_prefetched_objects_cache", {})
    cache.pop(name, None)  # the manager's queryset, not an earlier attachment
    queryset: QuerySet[Any] = getattr(instance, relation).all()
    queryset._result_cache = objects
    queryset.__dict__["_prefetch_done"] = True  # an attribute the stubs do not declare
    cache[name] = queryset


def grouped(objects: Iterable[M], key: str) -> Mapping[Any, list[M]]:
    """`objects` by the value of their attribute `key`, each group in the order given."""
    groups: dict[Any, list[M]] = {}
    for obj in objects:
        groups.setdefault(getattr(obj, key), []).append(obj)
    return groups
