"""Reception in the admin, patient side: "Find a patient" runs the API's search engine (its rank order and
cut-off, the staff member's branches only, audited), and registration accepts twins sharing a phone and
birth date after an explicit confirmation, at the staff member's branches."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from clinic.staff import staff_reader
from integrations.models import AuditLogEntry
from patients.models import Patient
from patients.selectors import patient_search
from tests.factories import BranchFactory, staff_of
from tests.helpers import age_today, row_counts
from tests.patients.factories import PatientFactory
from tests.patients.test_admin import form

pytestmark = pytest.mark.django_db
FIND = "/admin/patients/patient/find/"
ADD = "/admin/patients/patient/add/"
BOOK = "/admin/appointments/appointment/book/"
CONFIRM_LABEL = "Yes, this is a different person (e.g. a twin)"


def staff_client(django_user_model: Any, username: str, *branches: Any, role: str | None = "receptionist") -> Client:
    user = django_user_model.objects.create_user(username, password="x", is_staff=True)
    staff_of(user, *branches)
    if role:
        user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def blr() -> Any:
    return BranchFactory(code="BLR", name="Bengaluru Central")


@pytest.fixture
def mum() -> Any:
    return BranchFactory(code="MUM", name="Mumbai Andheri")


@pytest.fixture
def reception(django_user_model: Any, blr: Any) -> Client:
    return staff_client(django_user_model, "frontdesk", blr)


def result_rows(html: str) -> list[list[str]]:
    body = html.split('id="find_results"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)
    return [[re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row, re.S)] for row in rows]


# --- Find a patient -------------------------------------------------------------------------------------


def test_find_ranks_the_misspelt_name_first_and_shows_each_match_with_its_links(reception, blr, django_user_model):
    manoj = PatientFactory(
        first_name="Manoj", last_name="Verma", phone="+919845012345", gender="male",
        date_of_birth=date(1980, 5, 17), registration_branch=blr,
    )  # fmt: skip
    PatientFactory(first_name="Manoj", last_name="Kumar", registration_branch=blr)
    PatientFactory(first_name="Anil", last_name="Kumar", registration_branch=blr)
    user = django_user_model.objects.get(username="frontdesk")
    engine, _ = patient_search(client=staff_reader(user), search="Manj Varma", offset=0, limit=20)

    response = reception.get(FIND, {"q": "Manj Varma"})

    html = response.content.decode()
    assert response.status_code == 200
    rows = result_rows(html)
    assert [row[1] for row in rows] == [patient.patient_id for patient in engine]  # the engine's order, kept
    assert rows[0] == [
        "Manoj Verma", manoj.patient_id, f"{age_today(date(1980, 5, 17))} y · Male", "+91******2345",
        "BLR · Bengaluru Central", "Book appointment",
    ]  # fmt: skip
    assert f'href="/admin/patients/patient/{manoj.pk}/change/"' in html
    assert f'href="{BOOK}?patient={manoj.patient_id}"' in html
    assert "+919845012345" not in html


def test_find_shows_the_engines_cut_off_and_how_many_matched(reception, blr):
    for n in range(23):
        PatientFactory(first_name="Kavya", last_name="Menon", phone=f"+91970000{n:04d}", registration_branch=blr)

    html = reception.get(FIND, {"q": "kavya menon"}).content.decode()

    assert len(result_rows(html)) == 20
    assert "The best 20 of 23 matches; add to the search to narrow it." in html


def test_find_lists_only_patients_of_the_staff_members_branches_and_audits_those_shown(reception, blr, mum):
    here = PatientFactory(first_name="Anita", last_name="Desai", registration_branch=blr)
    PatientFactory(first_name="Anita", last_name="Desai", registration_branch=mum)

    response = reception.get(FIND, {"q": "anita desai"})

    assert [row[1] for row in result_rows(response.content.decode())] == [here.patient_id]
    entry = AuditLogEntry.objects.get()
    assert (entry.actor, entry.patient_ids, entry.path, entry.status) == ("staff:frontdesk", [here.pk], FIND, 200)


def test_find_by_phone_tail_and_by_patient_id(reception, blr):
    patient = PatientFactory(first_name="Lakshmi", last_name="Iyer", phone="+919812300281", registration_branch=blr)

    by_phone = result_rows(reception.get(FIND, {"q": "0281"}).content.decode())
    by_id = result_rows(reception.get(FIND, {"q": patient.patient_id.lower()}).content.decode())

    assert [row[0] for row in by_phone] == [row[0] for row in by_id] == ["Lakshmi Iyer"]


def test_find_without_a_match_or_with_one_character_shows_no_one_and_audits_nothing(reception, blr):
    PatientFactory(first_name="Rohan", last_name="Das", registration_branch=blr)

    short = reception.get(FIND, {"q": "r"}).content.decode()
    nothing = reception.get(FIND, {"q": "zzqqxx"}).content.decode()
    empty = reception.get(FIND)

    assert "Type at least 2 characters." in short
    assert "No patient matches “zzqqxx”." in nothing
    assert empty.status_code == 200
    assert 'id="find_results"' not in short + nothing + empty.content.decode()
    assert AuditLogEntry.objects.count() == 0


def test_a_staff_member_without_patient_permission_gets_403(django_user_model, blr):
    PatientFactory(first_name="Rohan", last_name="Das", registration_branch=blr)
    pharmacist_less = staff_client(django_user_model, "nobody", blr, role=None)

    assert pharmacist_less.get(FIND, {"q": "rohan"}).status_code == 403
    assert AuditLogEntry.objects.count() == 0


def test_the_patient_list_and_the_admin_index_link_to_find(reception):
    assert f'href="{FIND}"' in reception.get("/admin/patients/patient/").content.decode()
    index = reception.get("/admin/").content.decode()
    assert f'<a href="{FIND}">Find a patient</a>' in index
    assert '<a href="/admin/appointments/appointment/queue/">Today\'s queue</a>' in index


# --- Registration: twins after an explicit confirmation ------------------------------------------------


def test_a_twin_is_refused_first_with_the_possible_duplicate_and_a_confirmation_box(reception, blr):
    sister = PatientFactory(
        first_name="Asha", last_name="Kulkarni", phone="+919876543210", date_of_birth=date(1990, 4, 12),
        registration_branch=blr,
    )  # fmt: skip
    before = row_counts()

    response = reception.post(ADD, form(blr, first_name="Usha", last_name="Kulkarni"))

    html = response.content.decode()
    assert response.status_code == 200
    assert f"{sister.patient_id} already has this phone number and date of birth." in html
    assert (
        f"Possible duplicates: {sister.patient_id} Asha Kulkarni, born 12 Apr 1990, registered at BLR. Open the "
        "existing record instead, or tick the box if this is a different person and save again."
    ) in html
    assert '<input type="checkbox" name="distinct_person"' in html
    assert f'for="id_distinct_person">{CONFIRM_LABEL}' in html
    assert row_counts() == before


def test_with_the_box_ticked_the_twin_is_registered_through_the_service(reception, blr):
    sister = PatientFactory(phone="+919876543210", date_of_birth=date(1990, 4, 12), registration_branch=blr)

    response = reception.post(ADD, form(blr, first_name="Usha", last_name="Kulkarni", distinct_person="on"))

    assert response.status_code == 302, response.content[:3000]
    twin = Patient.objects.exclude(pk=sister.pk).get()
    assert (twin.name, twin.phone, twin.date_of_birth, twin.registration_branch) == (
        "Usha Kulkarni", "+919876543210", date(1990, 4, 12), blr,
    )  # fmt: skip
    assert re.fullmatch(r"PAT-\d{6}", twin.patient_id)


def test_a_registration_without_a_duplicate_shows_no_confirmation_box(reception, blr):
    page = reception.get(ADD).content.decode()

    assert CONFIRM_LABEL not in page
    assert 'type="hidden" name="distinct_person"' in page


def test_editing_a_twin_later_needs_no_confirmation_again(reception, blr):
    sister = PatientFactory(phone="+919876543210", date_of_birth=date(1990, 4, 12), registration_branch=blr)
    reception.post(ADD, form(blr, first_name="Usha", last_name="Kulkarni", distinct_person="on"))
    twin = Patient.objects.exclude(pk=sister.pk).get()

    response = reception.post(f"/admin/patients/patient/{twin.pk}/change/", form(blr, first_name="Ushaa"))

    assert response.status_code == 302
    twin.refresh_from_db()
    assert twin.first_name == "Ushaa"


def test_a_duplicate_at_another_branch_is_named_by_nothing(reception, blr, mum):
    hidden = PatientFactory(phone="+919876543210", date_of_birth=date(1990, 4, 12), registration_branch=mum)

    html = reception.post(ADD, form(blr)).content.decode()

    assert "A patient with this phone number and date of birth is registered at another branch." in html
    assert hidden.patient_id not in html
    assert Patient.objects.count() == 1


def test_the_registration_branch_defaults_to_and_is_limited_to_the_staff_members_branch(reception, blr, mum):
    page = reception.get(ADD).content.decode()
    elsewhere = reception.post(ADD, form(mum))

    assert f'<option value="{blr.pk}" selected>' in page
    assert str(mum.pk) not in page
    assert elsewhere.status_code == 200
    assert "registration_branch" in elsewhere.context["adminform"].form.errors
    assert Patient.objects.count() == 0


def test_a_search_with_a_nul_character_is_a_form_error_never_a_500(reception, blr):
    PatientFactory(first_name="Rohan", last_name="Das", registration_branch=blr)

    response = reception.get(FIND, {"q": "ro\x00han"})

    assert response.status_code == 200
    assert "Null characters are not allowed." in response.content.decode()
    assert 'id="find_results"' not in response.content.decode()
    assert AuditLogEntry.objects.count() == 0


def test_a_registration_that_loses_the_race_to_the_same_person_is_a_message_and_saves_nothing(
    reception, blr, monkeypatch
):
    from patients import selectors

    # The form was checked before the other registration of this person was saved (its check saw no one);
    # the service's check under the pair's lock is the one that refuses.
    monkeypatch.setattr(selectors, "patient_possible_duplicates", lambda **kwargs: ([], []))
    PatientFactory(phone="+919876543210", date_of_birth=date(1990, 4, 12), registration_branch=blr)
    before = row_counts()

    response = reception.post(ADD, form(blr, first_name="Asha", last_name="Kulkarni"), follow=True)

    assert response.redirect_chain == [(ADD, 302)]
    messages = [str(message) for message in response.context["messages"]]
    assert len(messages) == 1
    assert messages[0].endswith("Nothing was saved: find the patient, or confirm a twin.")
    assert row_counts() == before
