"""clinic.states: the closed list of Indian states and union territories, and what state_resolve reads; a
branch's state is one of them (CHECK constraint), and migration clinic 0005 normalises the stored ones or
fails naming the branches it cannot map."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction

from clinic.db import violated_constraint
from clinic.models import Branch
from clinic.states import (
    FORMER_GST_STATE_CODES,
    FORMER_ISO_CODES,
    FORMER_NAMES,
    GST_STATE_CODES,
    ISO_CODES,
    IndianState,
    state_gst_code,
    state_resolve,
)
from tests.factories import BranchFactory

migration = importlib.import_module("clinic.migrations.0005_branch_state_known")


def test_every_state_has_one_gst_code_and_one_iso_code_and_none_is_shared():
    assert set(GST_STATE_CODES) == set(IndianState.values)
    assert set(ISO_CODES) == set(IndianState)
    assert len(set(GST_STATE_CODES.values())) == len(IndianState) == 36
    assert len(set(ISO_CODES.values())) == len(IndianState)
    assert not set(FORMER_ISO_CODES) & set(ISO_CODES.values())
    assert not set(FORMER_GST_STATE_CODES) & set(GST_STATE_CODES.values())


def test_each_label_is_the_name_itself():
    assert [label for _, label in IndianState.choices] == IndianState.values


@pytest.mark.parametrize(
    ("state", "iso", "gst"),
    [
        ("Karnataka", "IN-KA", "29"),
        ("Jammu and Kashmir", "IN-JK", "01"),
        ("Delhi", "IN-DL", "07"),
        ("Dadra and Nagar Haveli and Daman and Diu", "IN-DH", "26"),
        ("Ladakh", "IN-LA", "38"),
        ("Telangana", "IN-TG", "36"),
        ("Uttarakhand", "IN-UK", "05"),
        ("Chhattisgarh", "IN-CG", "22"),
        ("Odisha", "IN-OD", "21"),
        ("Andhra Pradesh", "IN-AP", "37"),
        ("Andaman and Nicobar Islands", "IN-AN", "35"),
    ],
)
def test_a_state_is_found_by_its_name_its_iso_code_and_its_gst_code(state, iso, gst):
    assert ISO_CODES[IndianState(state)] == iso
    assert state_gst_code(state) == gst
    assert state_resolve(state) == state_resolve(iso) == state_resolve(gst) == IndianState(state)


def test_every_state_resolves_from_each_of_its_forms():
    for state in IndianState:
        forms = [state.value, state.value.upper(), state.value.lower(), ISO_CODES[state], GST_STATE_CODES[state]]
        assert {state_resolve(form) for form in forms} == {state}, state


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("karnataka", "Karnataka"),
        ("  KARNATAKA  ", "Karnataka"),
        ("Tamil  Nadu", "Tamil Nadu"),
        ("TamilNadu", "Tamil Nadu"),
        ("tamil\u00a0nadu", "Tamil Nadu"),  # a no-break space is whitespace too
        ("\tuttar pradesh\n", "Uttar Pradesh"),
        ("in-ka", "Karnataka"),
        (" IN-ka ", "Karnataka"),
        ("Jammu & Kashmir", "Jammu and Kashmir"),
        ("Andaman & Nicobar Islands", "Andaman and Nicobar Islands"),
        ("Dadra & Nagar Haveli & Daman & Diu", "Dadra and Nagar Haveli and Daman and Diu"),
        ("Orissa", "Odisha"),
        ("Uttaranchal", "Uttarakhand"),
        ("pondicherry", "Puducherry"),
        ("NCT of Delhi", "Delhi"),
        ("National Capital Territory of Delhi", "Delhi"),
        ("Daman and Diu", "Dadra and Nagar Haveli and Daman and Diu"),
        ("Dadra and Nagar Haveli", "Dadra and Nagar Haveli and Daman and Diu"),
        ("IN-TS", "Telangana"),
        ("IN-UT", "Uttarakhand"),
        ("IN-CT", "Chhattisgarh"),
        ("IN-OR", "Odisha"),
        ("IN-DD", "Dadra and Nagar Haveli and Daman and Diu"),
        ("IN-DN", "Dadra and Nagar Haveli and Daman and Diu"),
        ("25", "Dadra and Nagar Haveli and Daman and Diu"),
        (" 29 ", "Karnataka"),
    ],
)
def test_forms_and_former_names_resolve_to_the_canonical_name(text, expected):
    assert state_resolve(text) == IndianState(expected)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "Karnatka",  # a misspelling is not guessed at
        "Karnataka State",
        "Karna",
        "KA",  # an ISO code without its country
        "IN-XX",
        "IN KA",
        "IN-KA-1",
        "97",  # Other Territory
        "99",  # Centre Jurisdiction
        "28",  # Andhra Pradesh before 2014: today's Andhra Pradesh or Telangana
        "00",
        "39",
        "7",  # GST codes have two digits
        "029",
        "\uff12\uff19",  # full-width 29
        "\u0968\u0669",  # Devanagari 2, Arabic-Indic 9
        "\u00b2\u2079",  # superscript digits (str.isdigit() says yes)
        "\u212aarnataka",  # the Kelvin sign, which casefolds to k
        "\u0131n-ka",  # dotless i, which upper-cases to I
        "\uff2b\uff41\uff52\uff4e\uff41\uff54\uff41\uff4b\uff41",  # full-width Karnataka
        "Karnataka\x00",
        "\x00",
        "Kar-nataka",
        "New Delhi",  # a city, not the state's name
        "Bombay",
        "India",
    ],
)
def test_anything_else_resolves_to_none(text):
    assert state_resolve(text) is None


def test_no_former_name_is_also_another_state():
    for name, state in FORMER_NAMES.items():
        assert state_resolve(name) == state
        assert name not in IndianState.values


@pytest.mark.parametrize("name", ["karnataka", "IN-KA", "29", "Orissa", ""])
def test_the_gst_code_is_only_given_for_a_canonical_name(name):
    with pytest.raises(ValueError, match="is not a valid IndianState"):
        state_gst_code(name)


# --- Branches ---------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["karnataka", "IN-KA", "29", "", "Karnatka"])
def test_the_database_refuses_a_branch_state_that_is_not_a_canonical_name(state):
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        BranchFactory(code="BLR", state=state)

    assert violated_constraint(refused.value) == "branch_state_known"
    assert not Branch.objects.exists()


def insert_branches(states: dict[str, str]) -> None:
    """Branches with these raw states: the constraint is dropped inside the test's transaction (rolled
    back with it), as before migration 0005."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE clinic_branch DROP CONSTRAINT branch_state_known")
    for code, state in states.items():
        BranchFactory(code=code, state=state)


def stored_states() -> dict[str, str]:
    return dict(Branch.objects.values_list("code", "state"))


@pytest.mark.django_db
def test_the_branch_migration_maps_every_recognised_value_to_its_canonical_name(capsys):
    insert_branches({"BLR": "karnataka", "MYS": " IN-KA ", "MUM": "27", "BBS": "Orissa", "DEL": "Delhi"})

    migration.branch_states_normalise(apps, connection.schema_editor())

    assert stored_states() == {
        "BLR": "Karnataka",
        "MYS": "Karnataka",
        "MUM": "Maharashtra",
        "BBS": "Odisha",
        "DEL": "Delhi",
    }
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "clinic: branch state ' IN-KA ' normalised to 'Karnataka' on 1 branches.",
        "clinic: branch state '27' normalised to 'Maharashtra' on 1 branches.",
        "clinic: branch state 'Orissa' normalised to 'Odisha' on 1 branches.",
        "clinic: branch state 'karnataka' normalised to 'Karnataka' on 1 branches.",
    ]


@pytest.mark.django_db
def test_a_branch_whose_state_names_no_state_fails_the_migration_naming_it_and_changes_nothing():
    insert_branches({"BLR": "karnataka", "MUM": "Bombay", "XYZ": "", "DEL": "97"})

    with pytest.raises(migration.UnknownBranchState) as failed:
        migration.branch_states_normalise(apps, connection.schema_editor())

    assert str(failed.value).splitlines() == [
        "Branch DEL has state '97', which is not an Indian state or union territory.",
        "Branch MUM has state 'Bombay', which is not an Indian state or union territory.",
        "Branch XYZ has state '', which is not an Indian state or union territory.",
        "Nothing was changed. Set each branch's state to one of the names of clinic.states.IndianState (its "
        "ISO 3166-2:IN or GST state code also works), e.g. UPDATE clinic_branch SET state = 'Karnataka' WHERE "
        "code = 'BLR'; then migrate again.",
    ]
    assert stored_states() == {"BLR": "karnataka", "MUM": "Bombay", "XYZ": "", "DEL": "97"}
