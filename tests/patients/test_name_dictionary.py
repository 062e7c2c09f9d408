"""The name dictionary behind fuzzy search is kept by a trigger: every distinct patient name is in it
once, with its letter key, after inserts, renames and bulk loads alike."""

from __future__ import annotations

import pytest
from django.db import connection

from patients.models import PatientName
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db


def letter_key(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT patients_letter_key(%s)", [name])
        return cursor.fetchone()[0]


def test_a_new_name_is_recorded_once_with_its_letter_key():
    PatientFactory(first_name="Priya", last_name="Sharma")
    PatientFactory(first_name="Priya", last_name="Sharma")

    assert list(PatientName.objects.filter(name="priya sharma").values_list("name", "letter_key")) == [
        ("priya sharma", letter_key("priya sharma"))
    ]


def test_a_rename_records_the_new_name_and_keeps_the_old_one():
    patient = PatientFactory(first_name="Priya", last_name="Sharma")
    patient.last_name = "Verma"
    patient.save()

    assert set(PatientName.objects.filter(name__startswith="priya ").values_list("name", flat=True)) == {
        "priya sharma",
        "priya verma",
    }


def test_every_distinct_patient_name_is_in_the_dictionary_after_many_inserts():
    names = [("Rahul", "Gupta"), ("Anita", "Gupta"), ("Rahul", "Gupta"), ("Zoya", "Khan")]
    for first, last in names:
        PatientFactory(first_name=first, last_name=last)

    recorded = dict(PatientName.objects.values_list("name", "letter_key"))
    for first, last in names:
        name = f"{first} {last}".lower()
        assert recorded[name] == letter_key(name)
