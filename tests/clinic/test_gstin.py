"""A branch's GSTIN is checked as the GST portal checks it: the pattern, the state code of the branch's state
and the 15th character, a checksum of the first 14 (clinic.states.gstin_check_character). The demo's branches
carry valid numbers."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from clinic.models import Branch
from clinic.states import gstin_check_character
from tests.factories import BranchFactory

# Published GSTINs of real companies (their registrations' public search results), valid by construction.
REAL = [("27AAPFU0939F1ZV", "Maharashtra"), ("33AAACH7409R1Z8", "Tamil Nadu"), ("07AAACR5055K1Z9", "Delhi")]


@pytest.mark.parametrize(("gstin", "state"), REAL)
def test_the_check_character_of_published_gstins(gstin, state):
    assert gstin_check_character(gstin[:14]) == gstin[14]


@pytest.mark.django_db
@pytest.mark.parametrize(("gstin", "state"), REAL)
def test_a_branch_with_a_valid_gstin_is_clean(gstin, state):
    branch = BranchFactory.build(state=state, gstin=gstin.lower())

    branch.full_clean(exclude=["id"])

    assert branch.gstin == gstin


@pytest.mark.django_db
@pytest.mark.parametrize("last", ["W", "5", "Z"])
def test_a_gstin_whose_last_character_is_not_its_check_character_is_refused(last):
    branch = BranchFactory.build(state="Maharashtra", gstin=f"27AAPFU0939F1Z{last}")

    with pytest.raises(ValidationError) as refused:
        branch.full_clean(exclude=["id"])

    assert refused.value.message_dict == {
        "gstin": ["Not a valid GSTIN: its last character does not match the check character of the rest."]
    }


@pytest.mark.django_db
def test_the_admin_branch_form_refuses_a_wrong_check_character_and_saves_nothing(admin_client):
    branch = BranchFactory(code="PUN", name="Pune", state="Maharashtra", gstin="27AAPFU0939F1ZV")
    page = admin_client.get(f"/admin/clinic/branch/{branch.pk}/change/")
    form = {**{k: v for k, v in page.context["adminform"].form.initial.items() if v is not None}}
    form.update(gstin="27AAPFU0939F1ZA", state="Maharashtra", time_zone="Asia/Kolkata", code="PUN", name="Pune")

    response = admin_client.post(f"/admin/clinic/branch/{branch.pk}/change/", form)

    assert response.status_code == 200
    assert "does not match the check character" in response.content.decode()
    branch.refresh_from_db()
    assert branch.gstin == "27AAPFU0939F1ZV"


@pytest.mark.django_db
def test_the_demo_branches_carry_valid_gstins():
    call_command("seed_demo", stdout=io.StringIO())

    gstins = list(Branch.objects.exclude(gstin="").values_list("gstin", flat=True))

    assert gstins
    assert all(gstin_check_character(gstin[:14]) == gstin[14] for gstin in gstins)
