"""GET /api/v1/patients: summaries, order, pagination, filters, branch restriction, and search quality."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from integrations.models import AuditLogEntry
from patients.models import Patient
from tests.factories import BranchFactory
from tests.helpers import bearer, link_snapshot
from tests.patients.factories import PATIENTS, PatientFactory, VisitFactory, build_population

pytestmark = pytest.mark.django_db


@pytest.fixture
def branch():
    return BranchFactory(code="BLR")


@pytest.fixture
def reader(token_for):
    """An unrestricted client: sees every branch."""
    return token_for(["patients:read"])


def listing(client, token: str, query: str = "") -> Any:
    return client.get(f"{PATIENTS}{query}", **bearer(token))


def registered(patient: Patient, when: datetime) -> Patient:
    Patient.objects.filter(pk=patient.pk).update(registered_at=when)
    patient.refresh_from_db()
    return patient


def assert_fields_named(response: Any, *fields: str) -> None:
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "validation_error"
    assert [e["field"] for e in response.json()["errors"]] == list(fields)


# --- The list -------------------------------------------------------------------------------------


def test_the_list_is_a_bare_array_of_summaries_newest_registration_first(client, reader, branch):
    today = timezone.localdate()
    older = registered(
        PatientFactory(
            first_name="Rohan",
            last_name="Das",
            phone="+919845000001",
            gender="male",
            date_of_birth=today.replace(year=today.year - 30),
            registration_branch=branch,
        ),
        datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
    )
    newer = registered(
        PatientFactory(
            first_name="Meera",
            last_name="Pillai",
            phone="+919845000002",
            gender="female",
            date_of_birth=today.replace(year=today.year - 40) + timedelta(days=1),
            registration_branch=branch,
        ),
        datetime(2026, 1, 6, 9, 0, tzinfo=UTC),
    )

    response = listing(client, reader)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["X-Total-Count"] == "2"
    assert response.json() == [
        {
            "id": str(newer.id),
            "patient_id": newer.patient_id,
            "name": "Meera Pillai",
            "phone": "+919845000002",
            "age": 39,  # 40 tomorrow
            "gender": "female",
            "last_visit_date": None,
        },
        {
            "id": str(older.id),
            "patient_id": older.patient_id,
            "name": "Rohan Das",
            "phone": "+919845000001",
            "age": 30,  # 30 today
            "gender": "male",
            "last_visit_date": None,
        },
    ]


def test_last_visit_date_is_the_local_date_of_the_newest_visit(client, reader, branch):
    patient = PatientFactory(registration_branch=branch)
    VisitFactory(patient=patient, start=datetime(2025, 6, 1, 4, 0, tzinfo=UTC))
    VisitFactory(patient=patient, start=datetime(2026, 1, 10, 20, 0, tzinfo=UTC))  # 01:30 on the 11th in India
    VisitFactory(patient=patient, start=datetime(2025, 12, 31, 4, 0, tzinfo=UTC))

    [summary] = listing(client, reader).json()

    assert summary["last_visit_date"] == "2026-01-11"


def test_equal_registration_times_are_ordered_by_id(client, reader, branch):
    same = datetime(2026, 1, 1, tzinfo=UTC)
    patients = [registered(PatientFactory(registration_branch=branch), same) for _ in range(4)]

    response = listing(client, reader)

    assert [p["id"] for p in response.json()] == sorted(str(p.id) for p in patients)


def test_pages_with_total_count_and_link_header(client, reader, branch):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    patients = [registered(PatientFactory(registration_branch=branch), start + timedelta(hours=n)) for n in range(5)]

    response = listing(client, reader, "?per_page=2&page=2")

    assert [p["id"] for p in response.json()] == [str(patients[2].id), str(patients[1].id)]
    assert response["X-Total-Count"] == "5"
    base = f"http://testserver/api/v1/patients?as_of={link_snapshot(response['Link'])}"
    assert response["Link"] == (
        f'<{base}&page=1&per_page=2>; rel="first", <{base}&page=1&per_page=2>; rel="prev", '
        f'<{base}&page=3&per_page=2>; rel="next", <{base}&page=3&per_page=2>; rel="last"'
    )


def test_a_page_past_the_end_is_empty(client, reader, branch):
    PatientFactory(registration_branch=branch)

    response = listing(client, reader, "?page=3")

    assert response.status_code == 200
    assert response.json() == []
    assert response["X-Total-Count"] == "1"


@pytest.mark.parametrize(("query", "field"), [("?page=0", "page"), ("?per_page=101", "per_page")])
def test_out_of_range_pagination_is_a_400(client, reader, query, field):
    assert_fields_named(listing(client, reader, query), field)


def test_branch_id_filters_by_registration_branch(client, reader, branch):
    mumbai = BranchFactory(code="MUM", state="Maharashtra")
    here = PatientFactory(registration_branch=branch)
    PatientFactory(registration_branch=mumbai)

    response = listing(client, reader, f"?branch_id={branch.id}")

    assert [p["id"] for p in response.json()] == [str(here.id)]
    assert response["X-Total-Count"] == "1"


def test_registered_after_keeps_patients_registered_on_later_days(client, reader, branch):
    ist = timezone.get_default_timezone()
    on_9th = registered(PatientFactory(registration_branch=branch), datetime(2026, 1, 9, 23, 0, tzinfo=ist))
    on_10th = registered(PatientFactory(registration_branch=branch), datetime(2026, 1, 10, 23, 59, tzinfo=ist))
    on_11th = registered(PatientFactory(registration_branch=branch), datetime(2026, 1, 11, 0, 1, tzinfo=ist))

    response = listing(client, reader, "?registered_after=2026-01-10")

    assert [p["id"] for p in response.json()] == [str(on_11th.id)]
    assert {str(on_9th.id), str(on_10th.id)}.isdisjoint(p["id"] for p in response.json())
    assert response["X-Total-Count"] == "1"


def test_filters_combine_with_search(client, reader, branch):
    mumbai = BranchFactory(code="MUM", state="Maharashtra")
    here = PatientFactory(first_name="Kavya", last_name="Reddy", registration_branch=branch)
    PatientFactory(first_name="Kavya", last_name="Reddy", registration_branch=mumbai)

    response = listing(client, reader, f"?search=kavya+reddy&branch_id={branch.id}")

    assert [p["id"] for p in response.json()] == [str(here.id)]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?search=a", "search"),
        ("?search=%20a%20", "search"),
        ("?branch_id=blr", "branch_id"),
        ("?registered_after=2026-13-01", "registered_after"),
        ("?registered_after=10-01-2026", "registered_after"),
    ],
)
def test_bad_query_parameters_are_a_400_naming_them(client, reader, query, field):
    PatientFactory()

    assert_fields_named(listing(client, reader, query), field)


def test_every_bad_query_parameter_is_named_at_once(client, reader):
    response = listing(client, reader, "?search=x&branch_id=nope&registered_after=soon")

    assert sorted(e["field"] for e in response.json()["errors"]) == ["branch_id", "registered_after", "search"]


def test_unknown_query_parameters_are_refused(client, reader, branch):
    # docs/api-rules.md §1: a typo such as ?serach= must not silently list everyone.
    PatientFactory(registration_branch=branch)

    response = listing(client, reader, "?colour=blue")

    assert response.status_code == 400
    assert response.json()["code"] == "unknown_parameter"
    assert response.json()["errors"] == [
        {"field": "colour", "code": "unknown_parameter", "message": "Unknown query parameter."}
    ]


def test_a_restricted_client_lists_and_finds_only_its_branches_patients(client, token_for, branch):
    mumbai = BranchFactory(code="MUM", state="Maharashtra")
    mine = PatientFactory(first_name="Deepa", last_name="Kamath", phone="+919845777001", registration_branch=branch)
    theirs = PatientFactory(
        first_name="Deepa",
        last_name="Kamath",
        phone="+919845777002",
        national_health_id="55555555555555",
        registration_branch=mumbai,
    )
    token = token_for(["patients:read"], branches=[branch])

    for query in ("?search=9845777002", f"?search={theirs.patient_id}", "?search=5555-5555-5555-55"):
        response = listing(client, token, query)
        assert response.status_code == 200
        assert response.json() == [], query
        assert response["X-Total-Count"] == "0"
    for query in ("", "?search=deepa+kamath", "?search=deepa", "?search=kamath+deepa"):
        response = listing(client, token, query)
        assert [p["id"] for p in response.json()] == [str(mine.id)], query
        assert response["X-Total-Count"] == "1"
    assert listing(client, token, f"?branch_id={mumbai.id}").json() == []


def test_a_token_without_patients_read_is_403(client, token_for, branch):
    PatientFactory(registration_branch=branch, first_name="Hidden")

    response = listing(client, token_for(["patients:write"]))

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert b"Hidden" not in response.content
    assert not response.has_header("X-Total-Count")


def test_the_audit_row_names_the_patients_on_the_page(client, reader, branch):
    start = datetime(2026, 1, 1, tzinfo=UTC)
    patients = [registered(PatientFactory(registration_branch=branch), start + timedelta(hours=n)) for n in range(3)]

    response = listing(client, reader, "?per_page=2")

    row = AuditLogEntry.objects.get(request_id=response["X-Request-ID"])
    assert row.patient_ids == [patients[2].id, patients[1].id]


def test_the_list_takes_the_same_number_of_queries_for_2_and_20_patients(client, reader, branch):
    """Token with the client's branches, count, page (last visit by subquery, branch joined), audit row: 4."""

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert listing(client, reader).status_code == 200
        return len(queries)

    for patient in PatientFactory.create_batch(2, registration_branch=branch):
        VisitFactory(patient=patient)
    listing(client, reader)  # warm caches of the first request
    few = count()
    other = BranchFactory(code="MYS")
    for patient in PatientFactory.create_batch(18, registration_branch=other):
        VisitFactory(patient=patient)

    assert len(listing(client, reader).json()) == 20
    assert count() == few == 4


# --- Search over a realistic population ----------------------------------------------------------

POPULATION = 3000
SEED = 20240611
TARGETS = 30


def osa_distance(a: str, b: str) -> int:
    """Edit distance counting a swap of adjacent letters as one edit (optimal string alignment)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


def substitute(word: str, rng: random.Random) -> str:
    i = len(word) // 2
    letter = rng.choice([c for c in "bdgklmnprstv" if c != word[i].lower()])
    return word[:i] + letter + word[i + 1 :]


def transpose(word: str) -> str:
    """Swap two different adjacent letters near the middle ("Sharma" -> "Shamra")."""
    i = max(len(word) // 2 - 1, 1)
    while word[i] == word[i + 1]:
        i = i + 1 if i + 2 < len(word) else 1
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


@pytest.fixture
def population(branch) -> dict[str, Any]:
    """3000 patients with skewed, repeating Indian names; targets are patients whose full name is unique."""
    Patient.objects.bulk_create(build_population(POPULATION, branch=branch, seed=SEED))
    patients = list(Patient.objects.order_by("patient_id"))
    names = Counter(p.search_name for p in patients)
    assert len(names) < POPULATION * 0.5  # names repeat a lot, as in a real register
    assert max(names.values()) >= 20
    unique = [p for p in patients if names[p.search_name] == 1]
    targets = random.Random(SEED).sample(unique, TARGETS)
    return {"patients": patients, "names": set(names), "targets": targets}


def search_ids(client, token: str, text: str, per_page: int = 10) -> list[str]:
    response = client.get(PATIENTS, {"search": text, "per_page": per_page}, **bearer(token))
    assert response.status_code == 200, response.content
    return [p["id"] for p in response.json()]


def typo_queries(population: dict[str, Any], make) -> list[tuple[Patient, str]]:
    """(target, misspelled full name) where the target's name is the unique closest existing name: a
    query as close to another patient's name is ambiguous and no search can be expected to pick ours."""
    cases = []
    for index, patient in enumerate(population["targets"]):
        query = make(patient, index).lower()
        distance = osa_distance(query, patient.search_name)
        if distance and all(osa_distance(query, n) > distance for n in population["names"] - {patient.search_name}):
            cases.append((patient, query))
    return cases


def assert_ranks_first(client, token: str, cases: list[tuple[Patient, str]]) -> None:
    assert len(cases) >= 20, cases
    misses = [
        (query, patient.search_name)
        for patient, query in cases
        if search_ids(client, token, query)[:1] != [str(patient.id)]
    ]
    assert misses == []


def test_a_full_name_with_one_letter_substituted_finds_the_patient_first(client, reader, population):
    rng = random.Random(1)

    def misspell(patient: Patient, index: int) -> str:
        if index % 2:
            return f"{patient.first_name} {substitute(patient.last_name, rng)}"  # Priya Sharna
        return f"{substitute(patient.first_name, rng)} {patient.last_name}"

    assert_ranks_first(client, reader, typo_queries(population, misspell))


def test_a_full_name_with_two_letters_transposed_finds_the_patient_first(client, reader, population):
    def swap_letters(patient: Patient, index: int) -> str:
        if index % 2:
            return f"{patient.first_name} {transpose(patient.last_name)}"  # Priya Shamra
        return f"{transpose(patient.first_name)} {patient.last_name}"

    assert_ranks_first(client, reader, typo_queries(population, swap_letters))


def test_last_name_first_finds_the_patient_first(client, reader, population):
    cases = [(p, f"{p.last_name} {p.first_name}") for p in population["targets"]]  # Sharma Priya

    assert_ranks_first(client, reader, cases)


def test_partial_first_and_last_names_find_the_patient_in_the_top_10(client, reader, population):
    misses = []
    for patient in population["targets"]:
        first = patient.first_name[: max(3, len(patient.first_name) - 1)]
        last = patient.last_name[: max(3, len(patient.last_name) - 2)]
        query = f"{first} {last}"  # Priy Shar
        if str(patient.id) not in search_ids(client, reader, query):
            misses.append(query)

    assert misses == []


def test_phone_numbers_find_the_patient_first(client, reader, population):
    phones = [p.phone for p in population["patients"]]
    for patient in population["targets"][:20]:
        tail_length = next(n for n in range(4, 11) if sum(phone.endswith(patient.phone[-n:]) for phone in phones) == 1)
        tail = patient.phone[-tail_length:]
        national = patient.phone[3:]
        spaced = f"+91 {national[:5]} {national[5:]}"
        for query in (patient.phone, national, spaced, tail):
            assert search_ids(client, reader, query)[:1] == [str(patient.id)], query
        assert search_ids(client, reader, tail, per_page=100) == [str(patient.id)], tail


def test_a_shared_phone_tail_finds_every_patient_with_it(client, reader, population):
    phones = Counter(p.phone[-4:] for p in population["patients"])
    tail, count = phones.most_common(1)[0]
    assert count > 1

    response = client.get(PATIENTS, {"search": tail, "per_page": 100}, **bearer(reader))

    expected = {str(p.id) for p in population["patients"] if p.phone.endswith(tail)}
    assert {p["id"] for p in response.json()} == expected
    assert response["X-Total-Count"] == str(count)


@pytest.mark.parametrize("form", ["PAT-000042", "pat000042", "pat-000042", "Pat000042"])
def test_patient_id_in_any_case_with_or_without_hyphen_finds_that_patient_first(client, reader, population, form):
    target = next(p for p in population["patients"] if p.patient_id == "PAT-000042")

    assert search_ids(client, reader, form)[:1] == [str(target.id)]


def test_abha_number_with_or_without_hyphens_finds_that_patient_first(client, reader, population):
    for patient in population["targets"][:10]:
        abha = patient.national_health_id
        hyphenated = f"{abha[:2]}-{abha[2:6]}-{abha[6:10]}-{abha[10:]}"
        assert search_ids(client, reader, hyphenated)[:1] == [str(patient.id)], hyphenated
        assert search_ids(client, reader, abha)[:1] == [str(patient.id)], abha


def test_search_filters_with_trigram_operators_and_ranks_with_similarity(client, reader, population):
    """Name search runs over the dictionary of distinct name words: its WHERE uses only the index-backed
    pg_trgm operators and a prefix LIKE, names are reached by word equality (the (word, name) key),
    similarity() only scores and ranks, and patients are reached through search_name equality (the
    B-tree) for the page and the count."""
    target = population["targets"][0]

    with CaptureQueriesContext(connection) as queries:
        ids = search_ids(client, reader, f"{target.first_name} {substitute(target.last_name, random.Random(2))}")

    assert ids
    name_queries = [q["sql"] for q in queries if "patients_patientname" in q["sql"]]
    expansions = [q["sql"] for q in queries if "p.search_name = names.name" in q["sql"]]
    assert len(name_queries) == 1  # the names are ranked once,
    assert len(expansions) == 2  # then expanded to the page and counted, by equality on the B-tree
    for sql in name_queries:
        where_at = sql.index("FROM patients_nameword d WHERE ")
        where_part = sql[where_at : sql.index(" ORDER BY score", where_at)]
        # Interpolated for the log, the `%%` operator of the SQL template reads as `%`.
        assert "d.word % q.w" in where_part
        assert "d.letter_key % q.k" in where_part
        assert "d.word LIKE q.prefix" in where_part
        assert "SIMILARITY(" not in where_part.upper()
        assert "JOIN patients_namepart p ON p.word = c.word" in sql
        assert "SIMILARITY(N.NAME" in sql[sql.rindex(" ORDER BY ") :].upper()
    assert all("SIMILARITY(" not in sql.upper() for sql in expansions)
