"""clinic.db against the real PostgreSQL: counter_next hands out gap-free, unique numbers also to threads
racing on their own connections (and gives back the numbers of rolled-back transactions); counter_lock
holds a series without taking a number; violated_constraint names the constraint from psycopg's
diagnostics."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, OperationalError, connection, transaction

from appointments.models import Appointment, TokenCounter
from billing.models import InvoiceNumberCounter
from clinic.db import counter_lock, counter_next, violated_constraint
from patients.models import Patient
from patients.services import ABHA_UNIQUE_CONSTRAINT
from tests.appointments.factories import AppointmentFactory
from tests.factories import BranchFactory, DoctorFactory
from tests.helpers import all_at_once
from tests.patients.factories import PatientFactory

DAY = date(2026, 11, 30)
THREADS = 20


class Rollback(Exception):
    """Raised inside a transaction that took a number, to roll it back."""


@pytest.fixture
def doctor(db: None) -> Any:
    return DoctorFactory(branches=[BranchFactory(code="BLR")])


def _token_key(doctor: Any, day: date = DAY) -> dict[str, Any]:
    return {"doctor": doctor, "local_date": day}


def _counters() -> list[tuple[Any, date, int]]:
    return sorted(TokenCounter.objects.values_list("doctor_id", "local_date", "last_number"))


# --- counter_next -------------------------------------------------------------------------------------


def test_a_new_series_starts_at_1_and_each_take_is_the_next_number(doctor):
    with transaction.atomic():
        taken = [counter_next(counter=TokenCounter, key=_token_key(doctor)) for _ in range(3)]

    assert taken == [1, 2, 3]
    assert _counters() == [(doctor.id, DAY, 3)]


def test_each_key_is_its_own_series_and_a_primary_key_stands_for_its_instance(doctor):
    other = DoctorFactory()
    with transaction.atomic():
        first = counter_next(counter=TokenCounter, key=_token_key(doctor))
        by_pk = counter_next(counter=TokenCounter, key={"doctor": doctor.pk, "local_date": DAY})
        next_day = counter_next(counter=TokenCounter, key=_token_key(doctor, DAY + timedelta(days=1)))
        other_doctor = counter_next(counter=TokenCounter, key={"local_date": DAY, "doctor": other})

    assert (first, by_pk, next_day, other_doctor) == (1, 2, 1, 1)
    assert _counters() == sorted([(doctor.id, DAY, 2), (doctor.id, DAY + timedelta(days=1), 1), (other.id, DAY, 1)])


def test_an_invoice_number_series_is_keyed_by_branch_and_financial_year(db):
    branch = BranchFactory(code="BLR")
    with transaction.atomic():
        taken = [
            counter_next(counter=InvoiceNumberCounter, key={"branch": branch.id, "financial_year": year})
            for year in ("2026-27", "2026-27", "2025-26")
        ]

    assert taken == [1, 2, 1]
    assert sorted(InvoiceNumberCounter.objects.values_list("financial_year", "last_number")) == [
        ("2025-26", 1),
        ("2026-27", 2),
    ]


def test_a_rolled_back_take_gives_its_number_back(doctor):
    with transaction.atomic():
        counter_next(counter=TokenCounter, key=_token_key(doctor))

    def take_and_roll_back() -> int:
        with transaction.atomic():
            number = counter_next(counter=TokenCounter, key=_token_key(doctor))
            raise Rollback(number)

    with pytest.raises(Rollback) as rolled_back:
        take_and_roll_back()

    assert rolled_back.value.args == (2,)
    with transaction.atomic():
        assert counter_next(counter=TokenCounter, key=_token_key(doctor)) == 2
    assert _counters() == [(doctor.id, DAY, 2)]


def test_a_key_that_is_not_the_counters_unique_constraint_is_refused(doctor):
    for key in ({"doctor": doctor}, {"doctor": doctor, "local_date": DAY, "id": 1}, {"local_date": DAY}):
        with pytest.raises(ValueError, match="no unique constraint"):
            counter_next(counter=TokenCounter, key=key)

    assert _counters() == []


@pytest.mark.django_db(transaction=True)
def test_20_threads_taking_numbers_of_one_series_at_once_get_1_to_20_each_once(doctor):
    def take() -> int:
        with transaction.atomic():
            return counter_next(counter=TokenCounter, key=_token_key(doctor))

    results = all_at_once([take] * THREADS)

    assert sorted(results) == list(range(1, THREADS + 1)), results
    assert _counters() == [(doctor.id, DAY, THREADS)]


@pytest.mark.django_db(transaction=True)
def test_numbers_of_racing_transactions_that_roll_back_are_handed_out_again_so_no_gap_is_left(doctor):
    def take(index: int) -> Callable[[], int]:
        def run() -> int:
            with transaction.atomic():
                number = counter_next(counter=TokenCounter, key=_token_key(doctor))
                if index % 2:
                    raise Rollback
                return number

        return run

    results = all_at_once([take(index) for index in range(THREADS)])

    committed = sorted(result for result in results if isinstance(result, int))
    assert committed == list(range(1, THREADS // 2 + 1)), results
    assert sum(isinstance(result, Rollback) for result in results) == THREADS // 2
    assert _counters() == [(doctor.id, DAY, THREADS // 2)]


# --- counter_lock -------------------------------------------------------------------------------------


def test_counter_lock_creates_a_missing_series_at_0_and_returns_the_last_number_without_taking_one(doctor):
    with transaction.atomic():
        assert counter_lock(counter=TokenCounter, key=_token_key(doctor)) == 0
        counter_next(counter=TokenCounter, key=_token_key(doctor))
        assert counter_lock(counter=TokenCounter, key=_token_key(doctor)) == 1

    assert _counters() == [(doctor.id, DAY, 1)]


@pytest.mark.django_db(transaction=True)
def test_a_held_series_makes_another_connections_take_wait_until_commit(doctor):
    held, release = threading.Event(), threading.Event()

    def hold() -> int:
        with transaction.atomic():
            last = counter_lock(counter=TokenCounter, key=_token_key(doctor))
            held.set()
            release.wait(30)
            return last

    def take_impatiently() -> int:
        held.wait(30)
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '200ms'")
                return counter_next(counter=TokenCounter, key=_token_key(doctor))
        finally:
            release.set()

    holder_result, taker_result = all_at_once([hold, take_impatiently])

    assert holder_result == 0
    assert isinstance(taker_result, OperationalError)
    assert "lock timeout" in str(taker_result)
    assert _counters() == [(doctor.id, DAY, 0)]


# --- violated_constraint ------------------------------------------------------------------------------


def _refusal(write: Callable[[], Any]) -> IntegrityError:
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        write()
    return refused.value


def test_a_unique_constraint_is_named(doctor):
    TokenCounter.objects.create(doctor=doctor, local_date=DAY)

    refusal = _refusal(lambda: TokenCounter.objects.create(doctor=doctor, local_date=DAY))

    assert violated_constraint(refusal) == "token_counter_per_doctor_day"


def test_the_abha_columns_own_unique_constraint_has_the_name_the_patients_service_looks_for(db):
    PatientFactory(national_health_id="12345678901234")

    refusal = _refusal(lambda: PatientFactory(national_health_id="12345678901234"))

    assert violated_constraint(refusal) == ABHA_UNIQUE_CONSTRAINT == "patients_patient_national_health_id_key"


def test_a_check_constraint_is_named(db):
    refusal = _refusal(lambda: PatientFactory(national_health_id="1234"))

    assert violated_constraint(refusal) == "patient_abha_14_digits"


def test_an_exclusion_constraint_is_named(db):
    booked = AppointmentFactory()

    refusal = _refusal(
        lambda: AppointmentFactory(
            doctor=booked.doctor, branch=booked.branch, slot_start=booked.slot_start, slot_end=booked.slot_end
        )
    )

    assert violated_constraint(refusal) == "appointment_no_double_booking"
    assert Appointment.objects.count() == 1


def test_an_error_without_a_constraint_and_any_other_exception_give_none(db):
    not_null = _refusal(lambda: Patient.objects.filter(pk=PatientFactory().pk).update(first_name=None))

    assert violated_constraint(not_null) is None
    assert violated_constraint(IntegrityError("no database error behind it")) is None
    assert violated_constraint(ValueError("token_counter_per_doctor_day")) is None
