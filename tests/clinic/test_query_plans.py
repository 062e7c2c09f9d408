"""clinic.query_plans: a queryset compiled once per connection gives what the ORM gives, with new values."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.postgres.fields import ArrayField
from django.db import connection, connections, transaction
from django.db.models import BooleanField, CharField, F, IntegerField, QuerySet, UUIDField
from django.db.models.sql.compiler import SQLCompiler
from django.db.transaction import TransactionManagementError

from clinic.models import Department, Doctor
from clinic.query_plans import AnyOf, QueryPlan, Slot, UpdatePlan, grouped, prefetched
from integrations.webhooks.models import WebhookEvent
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory

pytestmark = pytest.mark.django_db(transaction=True)

DOCTORS_OF = QueryPlan(
    lambda: (
        Doctor.objects.select_related("department")
        .filter(
            department_id=Slot("department", UUIDField()), default_slot_minutes__gte=Slot("minutes", IntegerField())
        )
        .order_by("name")
    )
)
EVENTS_OF_TYPE = QueryPlan(lambda: WebhookEvent.objects.filter(type=Slot("type", CharField())).order_by("created_at"))


def _fields(obj):
    return {field.attname: getattr(obj, field.attname) for field in type(obj)._meta.concrete_fields}


def test_a_plan_returns_what_the_orm_returns_for_each_set_of_values(django_assert_num_queries):
    cardiology, paediatrics = DepartmentFactory(name="Cardiology"), DepartmentFactory(name="Paediatrics")
    DoctorFactory(name="B", department=cardiology, default_slot_minutes=15)
    DoctorFactory(name="A", department=cardiology, default_slot_minutes=30)
    DoctorFactory(name="C", department=cardiology, default_slot_minutes=10)
    DoctorFactory(name="D", department=paediatrics, default_slot_minutes=20)
    for department, minutes in ((cardiology, 15), (cardiology, 5), (paediatrics, 15), (paediatrics, 25)):
        expected = list(
            Doctor.objects.select_related("department")
            .filter(department=department, default_slot_minutes__gte=minutes)
            .order_by("name")
        )
        with django_assert_num_queries(1):  # the doctors and their departments, one statement
            got = DOCTORS_OF.fetch(department=department.pk, minutes=minutes)
            assert [_fields(d) for d in got] == [_fields(d) for d in expected]
            assert [_fields(d.department) for d in got] == [_fields(d.department) for d in expected]
        assert all(not d._state.adding and d._state.db == "default" for d in got)


def test_a_plan_compiles_once_per_connection(monkeypatch):
    department = DepartmentFactory()
    DoctorFactory(department=department, default_slot_minutes=15)
    plan = QueryPlan(lambda: Doctor.objects.filter(department_id=Slot("department", UUIDField())))
    assert len(plan.fetch(department=department.pk)) == 1
    compiled = []
    original = SQLCompiler.as_sql
    monkeypatch.setattr(SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(1) or original(self, *a, **k))
    for _ in range(3):
        assert len(plan.fetch(department=department.pk)) == 1
    assert compiled == []

    def other_thread():
        try:
            assert len(plan.fetch(department=department.pk)) == 1
        finally:
            connections.close_all()

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert compiled == [1]  # the other thread's connection compiled it for itself


def test_the_fields_converters_apply_as_in_the_orm():
    payload = {"amount": Decimal("10.50"), "nested": {"list": [1, "two"]}}
    WebhookEvent.objects.create(type="x.made", payload=payload, created_at=datetime(2026, 1, 1, tzinfo=UTC))
    [event] = EVENTS_OF_TYPE.fetch(type="x.made")
    assert event.payload == WebhookEvent.objects.get(pk=event.pk).payload
    assert event.payload["amount"] == Decimal("10.50")
    assert event.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert EVENTS_OF_TYPE.fetch(type="y.made") == []


def test_threads_each_get_their_own_values():
    departments = [DepartmentFactory(name=f"D{i}") for i in range(4)]
    for i, department in enumerate(departments):
        for n in range(i + 1):
            DoctorFactory(name=f"{i}-{n}", department=department, default_slot_minutes=15)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            for _ in range(30):
                got = DOCTORS_OF.fetch(department=departments[index].pk, minutes=0)
                assert [d.name for d in got] == [f"{index}-{n}" for n in range(index + 1)]
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_a_locking_plan_needs_a_transaction_and_locks_the_row():
    department = DepartmentFactory()
    doctor = DoctorFactory(department=department)
    plan = QueryPlan(lambda: Doctor.objects.select_for_update().filter(pk=Slot("doctor", UUIDField())))
    with pytest.raises(TransactionManagementError):
        plan.fetch(doctor=doctor.pk)
    seen: list[str] = []

    def try_lock() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '200ms'")
                try:
                    plan.fetch(doctor=doctor.pk)
                    seen.append("locked")
                except Exception as exc:
                    seen.append(type(exc).__name__)
        finally:
            connections.close_all()

    with transaction.atomic():
        assert plan.fetch(doctor=doctor.pk)[0].pk == doctor.pk
        thread = threading.Thread(target=try_lock)
        thread.start()
        thread.join()
    assert seen == ["OperationalError"]  # held by this transaction until it ended
    thread = threading.Thread(target=try_lock)
    thread.start()
    thread.join()
    assert seen == ["OperationalError", "locked"]


def test_the_statement_is_prepared_on_the_server_after_a_few_runs():
    department = DepartmentFactory()
    DoctorFactory(department=department, default_slot_minutes=15)
    plan = QueryPlan(lambda: Doctor.objects.filter(department_id=Slot("department", UUIDField())).order_by("id"))

    def prepared() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%clinic_doctor%"])
            return cursor.fetchone()[0]

    assert prepared() == 0
    for _ in range(connection.connection.prepare_threshold + 1):
        assert len(plan.fetch(department=department.pk)) == 1
    assert prepared() == 1
    assert plan.fetch(department=DepartmentFactory().pk) == []


def test_misuse_is_refused_clearly():
    with pytest.raises(KeyError, match="minutes"):
        DOCTORS_OF.fetch(department=DepartmentFactory().pk)
    prefetching = QueryPlan(lambda: Doctor.objects.prefetch_related("branches"))
    with pytest.raises(ValueError, match="does not prefetch"):
        prefetching.fetch()


def test_prefetched_objects_are_what_the_relation_returns(django_assert_num_queries):
    department = DepartmentFactory()
    doctors = [DoctorFactory(department=department, name=name) for name in ("Z", "Y")]
    with django_assert_num_queries(0):
        prefetched(department, "doctors", doctors)
        listed = department.doctors.all()
        assert isinstance(listed, QuerySet)
        assert list(listed) == doctors
    assert grouped(doctors, "department_id") == {department.pk: doctors}


def test_prefetched_many_to_many_is_what_the_relation_returns(django_assert_num_queries):
    branches = [BranchFactory(code=code) for code in ("QPA", "QPB")]
    doctor = DoctorFactory(branches=branches)
    fresh = Doctor.objects.get(pk=doctor.pk)
    with django_assert_num_queries(0):
        prefetched(fresh, "branches", branches)
        assert list(fresh.branches.all()) == branches
    with pytest.raises(ValueError, match="reverse of a many-to-many"):
        prefetched(branches[0], "doctors", [fresh])


def test_any_of_is_membership_in_an_array_of_any_length():
    departments = [DepartmentFactory(name=f"Any {i}") for i in range(3)]
    plan = QueryPlan(
        lambda: Department.objects.filter(AnyOf(F("id"), Slot("ids", ArrayField(UUIDField())))).order_by("name")
    )
    assert plan.fetch(ids=[]) == []
    assert plan.fetch(ids=[departments[1].pk]) == [departments[1]]
    assert plan.fetch(ids=[d.pk for d in departments]) == departments


def test_an_update_plan_updates_its_rows_and_counts_them():
    department = DepartmentFactory()
    doctors = [DoctorFactory(department=department, default_slot_minutes=15) for _ in range(2)]
    other = DoctorFactory(default_slot_minutes=15)
    plan = UpdatePlan(
        lambda: Doctor.objects.filter(department_id=Slot("department", UUIDField())),
        default_slot_minutes=Slot("minutes", IntegerField()),
    )
    assert plan.execute(department=department.pk, minutes=20) == 2
    assert plan.execute(department=department.pk, minutes=25) == 2
    assert {d.default_slot_minutes for d in Doctor.objects.filter(pk__in=[d.pk for d in doctors])} == {25}
    assert Doctor.objects.get(pk=other.pk).default_slot_minutes == 15
    assert plan.execute(department=DepartmentFactory().pk, minutes=30) == 0


def test_an_update_plan_across_a_join_is_refused():
    plan = UpdatePlan(
        lambda: Doctor.objects.filter(department__name=Slot("name", CharField())), is_active=Slot("on", BooleanField())
    )
    with pytest.raises(ValueError, match="its own table only"):
        plan.execute(name="x", on=False)


def test_each_connection_compiles_a_queryset_of_its_own(monkeypatch):
    """The ORM mutates a Query while compiling it (its table aliases): threads compiling one shared Query at
    once could select through each other's aliases, so no two compilations may share one."""
    department = DepartmentFactory()
    DoctorFactory(department=department, default_slot_minutes=15)
    plan = QueryPlan(
        lambda: Doctor.objects.select_related("department").filter(department_id=Slot("department", UUIDField()))
    )
    compiled: list[Any] = []  # the Query objects themselves, kept alive so that no id is reused
    original = SQLCompiler.as_sql
    monkeypatch.setattr(
        SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(self.query) or original(self, *a, **k)
    )

    def run() -> None:
        try:
            assert len(plan.fetch(department=department.pk)) == 1
        finally:
            connections.close_all()

    assert len(plan.fetch(department=department.pk)) == 1
    for _ in range(2):
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    assert len(compiled) == 3
    assert len({id(query) for query in compiled}) == 3  # three connections, three Query objects
    assert all(query is not plan._template().query for query in compiled)  # the template is never compiled


def test_a_filter_on_a_prefetched_relation_stays_within_it():
    """The attached queryset is the relation's own: get() or filter() on it queries within the relation, never
    across the table (a service's caller may filter the items of the order it got back)."""
    department, other = DepartmentFactory(), DepartmentFactory()
    mine = DoctorFactory(department=department, name="Mine")
    DoctorFactory(department=other, name="Theirs")
    prefetched(department, "doctors", [mine])
    assert department.doctors.get() == mine
    assert list(department.doctors.filter(name="Theirs")) == []
