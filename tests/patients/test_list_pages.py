"""GET /api/v1/patients without search: X-Total-Count from the registration counts (RegistrationCount,
kept by triggers) and deep pages located through them, checked against plain COUNT and ORDER BY/OFFSET."""

from __future__ import annotations

import importlib
import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from patients.models import Patient, RegistrationCount
from tests.factories import BranchFactory
from tests.helpers import bearer
from tests.patients.factories import PATIENTS, PatientFactory, post_patient

pytestmark = pytest.mark.django_db

backfill_migration = importlib.import_module("patients.migrations.0004_registration_count")

# Token with the client's branches, total and day, page, audit row.
LIST_QUERIES = 4


def listing(client, token: str, query: str = "") -> Any:
    response = client.get(f"{PATIENTS}{query}", **bearer(token))
    assert response.status_code == 200, response.content
    return response


def total(client, token: str, query: str = "") -> int:
    return int(listing(client, token, query)["X-Total-Count"])


def register_at(when: dict[Patient, datetime]) -> None:
    """Set registered_at of several patients in one UPDATE statement (auto_now_add ignores given values)."""
    Patient.objects.filter(pk__in=[p.pk for p in when]).update(
        registered_at=Case(*(When(pk=p.pk, then=Value(at)) for p, at in when.items()))
    )


def allow_patient_deletes() -> None:
    """Patients are never deleted (a trigger refuses it, docs/api-rules.md §7), but the count triggers still
    follow a deletion done with that guard off (maintenance by a database owner). The guard is disabled
    inside the test's transaction only, which rolls it back."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE refuses pending deferred FK checks
        cursor.execute("ALTER TABLE patients_patient DISABLE TRIGGER patients_patient_never_deleted")


def counts() -> dict[tuple[date, Any], int]:
    """RegistrationCount as {(UTC day, branch id): n}, rows that dropped to zero left out."""
    return {
        (day, branch): n
        for day, branch, n in RegistrationCount.objects.values_list("day", "branch_id", "registered")
        if n
    }


def counted_from_patients() -> dict[tuple[date, Any], int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (registered_at AT TIME ZONE 'UTC')::date, registration_branch_id, count(*) "
            "FROM patients_patient GROUP BY 1, 2"
        )
        return {(day, branch): n for day, branch, n in cursor.fetchall()}


@pytest.fixture
def branches():
    return [BranchFactory(code=code) for code in ("BLR", "MYS", "MUM")]


@pytest.fixture
def everyone(token_for):
    return token_for(["patients:read"])


# --- The counts follow every kind of write -------------------------------------------------------


def test_the_total_follows_registrations_deletions_and_branch_and_day_moves(client, everyone, token_for, branches, db):
    blr, mys, mum = branches
    only_blr = token_for(["patients:read"], branches=[blr])
    writer = token_for(["patients:read", "patients:write"], branches=[blr])

    def assert_totals() -> None:
        assert counts() == counted_from_patients()
        assert total(client, everyone) == Patient.objects.count()
        assert total(client, only_blr) == Patient.objects.filter(registration_branch=blr).count()
        assert (
            total(client, everyone, f"?branch_id={mys.id}") == Patient.objects.filter(registration_branch=mys).count()
        )

    PatientFactory.create_batch(3, registration_branch=blr)
    assert_totals()
    body = {"first_name": "Api", "last_name": "Made", "date_of_birth": "1990-01-01", "gender": "other"}
    assert post_patient(client, writer, {**body, "phone": "+919811100001"}).status_code == 201
    # One INSERT of many rows over several branches, as bulk loads do.
    Patient.objects.bulk_create(
        [
            PatientFactory.build(registration_branch=branch, search_name="bulk", phone_digits_reversed="1")
            for branch in (blr, mys, mys, mum, mum, mum)
        ]
    )
    assert_totals()

    moved = Patient.objects.filter(registration_branch=blr).first()
    assert moved is not None
    moved.registration_branch = mys
    moved.save()
    assert_totals()
    Patient.objects.filter(registration_branch=mum).update(registration_branch=blr)
    assert_totals()
    register_at({p: datetime(2025, 1, 1, 12, tzinfo=UTC) for p in Patient.objects.filter(registration_branch=mys)})
    assert_totals()

    allow_patient_deletes()
    Patient.objects.filter(pk=moved.pk).delete()
    assert_totals()
    Patient.objects.filter(registration_branch=blr).delete()
    assert_totals()
    assert total(client, only_blr) == 0


def test_a_rolled_back_registration_leaves_the_total_as_it_was(client, everyone, branches):
    PatientFactory.create_batch(2, registration_branch=branches[0])
    before = counts()
    allow_patient_deletes()

    def register_then_fail() -> None:
        with transaction.atomic():
            PatientFactory.create_batch(5, registration_branch=branches[1])
            Patient.objects.filter(registration_branch=branches[0]).delete()
            assert total(client, everyone) == 5
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        register_then_fail()

    assert counts() == before == counted_from_patients()
    assert total(client, everyone) == 2


def test_an_update_that_moves_no_patient_to_another_branch_or_day_writes_no_count(branches):
    patients = PatientFactory.create_batch(4, registration_branch=branches[0])
    PatientFactory.create_batch(2, registration_branch=branches[1])

    def row_versions() -> list[tuple[Any, ...]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT day, branch_id, ctid FROM patients_registrationcount ORDER BY 1, 2")
            return cursor.fetchall()

    versions = row_versions()
    Patient.objects.update(first_name="Renamed", phone="+919800000000")
    patients[0].last_name = "Edited"
    patients[0].save()
    # Two patients trade branches: nothing moves in the counts either.
    other = Patient.objects.filter(registration_branch=branches[1]).first()
    assert other is not None
    Patient.objects.filter(pk__in=[patients[1].pk, other.pk]).update(
        registration_branch=Case(When(pk=patients[1].pk, then=Value(branches[1].pk)), default=Value(branches[0].pk))
    )

    assert row_versions() == versions


def test_truncating_patients_empties_the_counts(branches):
    PatientFactory.create_batch(3, registration_branch=branches[0])

    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # TRUNCATE refuses pending deferred FK checks
        cursor.execute("TRUNCATE patients_patient CASCADE")

    assert not RegistrationCount.objects.exists()


def test_the_migrations_backfill_counts_what_the_triggers_count(branches):
    for n, branch in enumerate(branches):
        PatientFactory.create_batch(n + 1, registration_branch=branch)
    register_at({p: datetime(2024, 2, 29, 23, 59, tzinfo=UTC) for p in Patient.objects.all()[:2]})
    kept = counts()

    RegistrationCount.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(backfill_migration.BACKFILL)

    assert counts() == kept == counted_from_patients()


# --- registered_after: after a local day, counted across UTC days ----------------------------------


def test_registered_after_starts_at_the_next_local_midnight(client, everyone, branches):
    """The service's zone is Asia/Kolkata (+05:30): after 2026-01-05 means from 2026-01-05T18:30Z, which
    cuts a UTC day in two; the part after the boundary is counted through the index, whole days from the
    counts."""
    boundary = datetime(2026, 1, 5, 18, 30, tzinfo=UTC)
    moments = [
        boundary - timedelta(microseconds=1),  # 23:59:59.999999 local on the 5th: not after
        boundary,  # local midnight: after
        boundary + timedelta(minutes=1),
        datetime(2026, 1, 5, 23, 59, tzinfo=UTC),  # same UTC day as the boundary
        datetime(2026, 1, 6, 0, 0, tzinfo=UTC),  # the first whole UTC day
        datetime(2026, 1, 7, 12, 0, tzinfo=UTC),
        datetime(2026, 1, 5, 3, 0, tzinfo=UTC),  # same UTC day, before the boundary
        datetime(2026, 1, 4, 20, 0, tzinfo=UTC),
    ]
    patients = PatientFactory.create_batch(len(moments) * 2, registration_branch=branches[0])
    register_at({p: moments[n % len(moments)] for n, p in enumerate(patients)})

    for after in (date(2026, 1, 4), date(2026, 1, 5), date(2026, 1, 6), date(2026, 1, 7), date(2000, 1, 1)):
        expected = Patient.objects.filter(registered_at__date__gt=after)
        response = listing(client, everyone, f"?registered_after={after}&per_page=100")
        assert int(response["X-Total-Count"]) == expected.count(), after
        assert [row["id"] for row in response.json()] == [
            str(pk) for pk in expected.order_by("-registered_at", "id").values_list("pk", flat=True)
        ]
    assert total(client, everyone, "?registered_after=2026-01-05") == 10
    assert total(client, everyone, "?registered_after=9999-12-31") == 0


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_registered_after_in_another_service_time_zone(client, everyone, branches, settings, zone):
    settings.TIME_ZONE = zone
    patients = PatientFactory.create_batch(24, registration_branch=branches[0])
    start = datetime(2026, 3, 7, 0, 0, tzinfo=UTC)  # a DST change in New York on the 8th
    register_at({p: start + timedelta(hours=5 * n) for n, p in enumerate(patients)})

    for after in (date(2026, 3, 7), date(2026, 3, 8), date(2026, 3, 9)):
        with timezone.override(zone):
            expected = Patient.objects.filter(registered_at__date__gt=after).count()
        assert total(client, everyone, f"?registered_after={after}") == expected


# --- Deep pages are the plain ORDER BY / OFFSET pages --------------------------------------------


@pytest.fixture
def population(branches):
    """300 patients over 8 UTC days at 3 branches, with registrations at UTC and local midnights, one
    microsecond either side of them, and ties on registered_at (broken by id)."""
    rng = random.Random(7)
    start = datetime(2026, 2, 1, tzinfo=UTC)
    special = []
    for day in range(8):
        midnight = start + timedelta(days=day)
        local_midnight = midnight - timedelta(hours=5, minutes=30)
        special += [midnight, local_midnight, midnight - timedelta(microseconds=1), local_midnight]
        special += [local_midnight + timedelta(microseconds=1)] * 3
    moments = special + [
        start + timedelta(seconds=rng.randrange(8 * 86400), microseconds=rng.randrange(10**6))
        for _ in range(300 - len(special))
    ]
    patients = PatientFactory.create_batch(300, registration_branch=branches[0])
    Patient.objects.filter(pk__in=[p.pk for p in patients[100:200]]).update(registration_branch=branches[1])
    Patient.objects.filter(pk__in=[p.pk for p in patients[200:]]).update(registration_branch=branches[2])
    register_at(dict(zip(patients, moments, strict=True)))
    return moments


def test_every_page_is_the_plain_order_by_offset_page(client, everyone, token_for, branches, population):
    blr, mys, mum = branches
    clients = {
        None: everyone,
        (blr.id,): token_for(["patients:read"], branches=[blr]),
        (blr.id, mum.id): token_for(["patients:read"], branches=[blr, mum]),
    }
    rng = random.Random(11)
    days = [None, date(2026, 1, 31), date(2026, 2, 2), date(2026, 2, 4), date(2026, 2, 8), date(2026, 3, 1)]
    for _ in range(120):
        allowed = rng.choice(list(clients))
        branch = rng.choice([None, blr, mys, mum])
        after = rng.choice(days)
        per_page = rng.choice([1, 3, 7, 20, 100])
        rows = Patient.objects.all()
        if allowed is not None:
            rows = rows.filter(registration_branch_id__in=allowed)
        if branch is not None:
            rows = rows.filter(registration_branch=branch)
        if after is not None:
            rows = rows.filter(registered_at__date__gt=after)
        expected_total = rows.count()
        page = rng.randint(1, max(1, expected_total // per_page + 2))
        query = f"?page={page}&per_page={per_page}"
        query += f"&branch_id={branch.id}" if branch else ""
        query += f"&registered_after={after}" if after else ""

        response = listing(client, clients[allowed], query)

        offset = (page - 1) * per_page
        expected = rows.order_by("-registered_at", "id").values_list("pk", flat=True)[offset : offset + per_page]
        assert int(response["X-Total-Count"]) == expected_total, query
        assert [row["id"] for row in response.json()] == [str(pk) for pk in expected], (allowed, query)


def test_the_last_visit_date_on_a_deep_page(client, everyone, branches, population):
    from tests.patients.factories import VisitFactory

    tenth = Patient.objects.order_by("-registered_at", "id")[150]
    VisitFactory(patient=tenth, start=datetime(2026, 2, 3, 20, 0, tzinfo=UTC))
    VisitFactory(patient=tenth, start=datetime(2026, 1, 3, 20, 0, tzinfo=UTC))

    row = listing(client, everyone, "?page=16&per_page=10").json()[0]

    assert (row["id"], row["last_visit_date"]) == (str(tenth.id), "2026-02-04")  # 01:30 the next day in India


# --- Query counts ---------------------------------------------------------------------------------


def test_page_1_and_a_deep_page_take_4_queries_and_a_page_past_the_end_3(
    client, everyone, branches, population, django_assert_num_queries
):
    listing(client, everyone)  # warm caches of the first request

    with django_assert_num_queries(LIST_QUERIES):
        assert len(listing(client, everyone).json()) == 20
    with django_assert_num_queries(LIST_QUERIES):
        assert len(listing(client, everyone, "?page=5&per_page=20&registered_after=2026-02-03").json()) == 20
    with django_assert_num_queries(LIST_QUERIES - 1):
        assert listing(client, everyone, "?page=99").json() == []


def test_a_branch_the_client_may_not_see_lists_nothing_without_reading_patients(
    client, token_for, branches, population, django_assert_num_queries
):
    only_blr = token_for(["patients:read"], branches=[branches[0]])
    listing(client, only_blr)

    with django_assert_num_queries(2):  # token with the client's branches, audit row
        response = listing(client, only_blr, f"?branch_id={branches[1].id}")

    assert (response.json(), response["X-Total-Count"]) == ([], "0")
