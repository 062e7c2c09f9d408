"""The word dictionary behind name search (migration 0006): every word of every distinct name, and which
names hold it, kept by a trigger on the name dictionary; and the search behaviours it must keep."""

from __future__ import annotations

import pytest
from django.db import connection

from clinic.text import like_prefix
from patients.models import Patient
from tests.helpers import bearer, sql_rows
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
PATIENTS = "/api/v1/patients"


@pytest.fixture
def reader(token_for):
    return token_for(["patients:read"])


def names_found(client, token: str, text: str) -> list[str]:
    response = client.get(PATIENTS, {"search": text, "per_page": 10}, **bearer(token))
    assert response.status_code == 200, response.content
    return [p["name"] for p in response.json()]


def test_each_word_of_a_new_name_is_recorded_once_with_the_names_holding_it():
    PatientFactory(first_name="Mohammed Abdul", last_name="Rahman")
    PatientFactory(first_name="Abdul", last_name="Khan")
    PatientFactory(first_name="Abdul", last_name="Khan")

    words = sql_rows(
        "SELECT word, letter_key FROM patients_nameword WHERE word IN ('mohammed', 'abdul', 'rahman', 'khan')"
    )
    assert words == {("mohammed", "adehmmmo"), ("abdul", "abdlu"), ("rahman", "aahmnr"), ("khan", "ahkn")}
    assert sql_rows("SELECT name FROM patients_namepart WHERE word = 'abdul'") == {
        ("mohammed abdul rahman",),
        ("abdul khan",),
    }


def test_a_bulk_insert_and_a_rename_keep_the_words_complete():
    patient = PatientFactory(first_name="Ira", last_name="Bose")
    branch = patient.registration_branch
    Patient.objects.bulk_create(
        [
            # bulk_create skips save(), so the row carries its search name as a bulk load writes it
            PatientFactory.build(
                first_name=f, last_name=last, search_name=f"{f} {last}".lower(), registration_branch=branch
            )
            for f, last in [("Zoya", "Qureshi"), ("Ira", "Bose")]
        ]
    )
    patient.last_name = "Basu"
    patient.save()

    assert sql_rows(
        "SELECT word, name FROM patients_namepart WHERE word IN ('zoya', 'qureshi', 'ira', 'bose', 'basu')"
    ) == {
        ("zoya", "zoya qureshi"),
        ("qureshi", "zoya qureshi"),
        ("ira", "ira bose"),
        ("bose", "ira bose"),
        ("ira", "ira basu"),
        ("basu", "ira basu"),
    }


def test_a_three_word_name_is_found_with_a_typo_and_in_any_order(client, reader):
    PatientFactory(first_name="Mohammed Abdul", last_name="Rahman")
    PatientFactory(first_name="Abdul", last_name="Rahim")

    assert names_found(client, reader, "mohamed abdul rahman")[0] == "Mohammed Abdul Rahman"
    assert names_found(client, reader, "rahman mohammed")[0] == "Mohammed Abdul Rahman"


def test_a_name_with_one_unknown_word_still_finds_the_names_holding_the_other(client, reader):
    """A mistyped beyond recognition surname does not hide every Priya: names holding candidates of more
    query words come first, then those holding fewer."""
    PatientFactory(first_name="Priya", last_name="Sharma")

    assert names_found(client, reader, "priya xqzwv") == ["Priya Sharma"]


@pytest.mark.parametrize(
    ("word", "matches", "does_not_match"),
    [("pri%", "pri%x", "prix"), ("pri_", "pri_x", "prix"), ("a\\b", "a\\bc", "abc")],
)
def test_like_wildcards_in_a_query_word_are_literal(word, matches, does_not_match):
    pattern = like_prefix(word)
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s LIKE %s, %s LIKE %s", [matches, pattern, does_not_match, pattern])
        assert cursor.fetchone() == (True, False)


@pytest.mark.parametrize(
    ("text", "queries"),
    [
        # token with the client's branches, names, page, count, the page's patients, audit
        ("priya sharma", 6),
        ("sharma", 6),
        # token with the client's branches, the page with its count, the page's patients, audit
        ("000003", 4),
    ],
)
def test_a_search_takes_a_fixed_number_of_queries(client, reader, django_assert_num_queries, text, queries):
    for n in range(12):
        PatientFactory(first_name="Priya", last_name=["Sharma", "Verma", "Shah"][n % 3], phone=f"+9198450{n:05d}")

    with django_assert_num_queries(queries):
        assert names_found(client, reader, text)


@pytest.mark.django_db(transaction=True)
def test_emptying_the_name_dictionary_empties_the_words():
    """Django's flush truncates the dictionary between transactional tests; the words follow it."""
    PatientFactory(first_name="Zoya", last_name="Qureshi")
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE patients_patient, patients_patientname CASCADE")

    assert sql_rows("SELECT word FROM patients_nameword") == set()
    assert sql_rows("SELECT word FROM patients_namepart") == set()
