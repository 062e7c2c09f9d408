"""Staff branches (docs/staff.md): a staff member of one branch sees and reaches nothing of another in any
admin list, page, count, filter or related choice; an account with no branches sees nothing unless marked
network-wide; the role groups exist with their journeys' permissions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client

from clinic.models import Branch, StaffProfile
from clinic.roles import ROLES
from tests.factories import network_wide, staff_of

pytestmark = pytest.mark.django_db

# The lookup from each branch-owned model the admin lists to its branch, written here independently of
# clinic.staff (the code under test): a row whose branch is not BLR must never reach a BLR member.
BRANCH_OF: dict[str, str | tuple[str, ...]] = {
    "clinic.branch": "pk",
    "clinic.doctor": "branches",
    "patients.patient": "registration_branch",
    "patients.visit": ("branch", "patient__registration_branch"),  # a visit there, of a patient of there
    "patients.diagnosis": "patient__registration_branch",
    "patients.allergy": "patient__registration_branch",
    "patients.medication": "patient__registration_branch",
    "appointments.weeklysession": "branch",
    "appointments.branchholiday": "branch",
    "appointments.appointment": "branch",
    "billing.invoice": "branch",
    "billing.payment": "branch",
    "billing.creditnote": "branch",
    "billing.refund": "branch",
    "billing.invoicenumbercounter": "branch",
    "billing.creditnotenumbercounter": "branch",
    "lab.laborder": "branch",
    "pharmacy.batch": "branch",
    "pharmacy.stockmovement": "batch__branch",
    "pharmacy.prescription": "branch",
    "pharmacy.dispense": "branch",
}


@pytest.fixture
def demo() -> dict[str, Branch]:
    call_command("seed_demo", verbosity=0)
    return {branch.code: branch for branch in Branch.objects.all()}


def _login(django_user_model: Any, name: str, **extra: Any) -> tuple[Any, Client]:
    user = django_user_model.objects.create_superuser(name, f"{name}@clinic.invalid", None, **extra)
    client = Client()
    client.force_login(user)
    return user, client


def _admin_of(model: type[Any]) -> Any:
    return admin.site._registry[model]


def _registered(label: str) -> type[Any]:
    return next(model for model in admin.site._registry if model._meta.label_lower == label)


def test_a_member_of_one_branch_sees_and_reaches_no_row_of_another(django_user_model, demo):
    user, client = _login(django_user_model, "blr-staff")
    staff_of(user, demo["BLR"])
    checked = []
    for label, path in BRANCH_OF.items():
        model = _registered(label)
        at_blr = {lookup: demo["BLR"].pk for lookup in ((path,) if isinstance(path, str) else path)}
        others = model._default_manager.exclude(**at_blr).order_by("pk")
        if label == "clinic.doctor":  # a doctor of both branches is BLR's too
            others = others.exclude(branches=demo["BLR"])
        own = model._default_manager.filter(**at_blr).distinct()
        listing = client.get(f"/admin/{model._meta.app_label}/{model._meta.model_name}/")
        assert listing.status_code == 200, label
        assert listing.context["cl"].result_count == own.count(), label
        page = listing.content.decode()
        for other in others[:20]:
            change = f"/admin/{model._meta.app_label}/{model._meta.model_name}/{other.pk}/change/"
            assert change not in page, label
            refused = client.get(change)
            assert (refused.status_code, refused["Location"]) == (302, "/admin/"), label
        if others.exists():
            checked.append(label)
    # The demo has rows of the other branch in every busy table (so the loop above did refuse something).
    assert set(checked) >= {
        "clinic.branch",
        "patients.patient",
        "patients.visit",
        "billing.invoice",
        "billing.payment",
        "lab.laborder",
        "pharmacy.batch",
        "appointments.weeklysession",
    }


def test_the_branch_filter_and_the_branch_choice_offer_only_the_members_branches(django_user_model, demo):
    user, client = _login(django_user_model, "blr-staff")
    staff_of(user, demo["BLR"])
    listing = client.get("/admin/billing/invoice/").content.decode()
    # One branch to choose from: Django shows no branch filter at all, and MUM appears nowhere.
    assert "branch__id__exact" not in listing
    assert str(demo["MUM"].pk) not in listing
    network = Client()
    network.force_login(network_wide(django_user_model.objects.create_superuser("ho", "ho@clinic.invalid", None)))
    assert f"branch__id__exact={demo['MUM'].pk}" in network.get("/admin/billing/invoice/").content.decode()
    add_page = client.get("/admin/appointments/weeklysession/add/").content.decode()
    choices = re.findall(
        r'<option value="([0-9a-f-]{36})"', add_page.split('name="branch"', 1)[1].split("</select>")[0]
    )
    assert choices == [str(demo["BLR"].pk)]


def test_a_change_posted_for_another_branch_is_refused_and_changes_nothing(django_user_model, demo):
    from appointments.models import WeeklySession

    user, client = _login(django_user_model, "blr-staff")
    staff_of(user, demo["BLR"])
    session = WeeklySession.objects.filter(branch=demo["BLR"]).first()
    before = list(WeeklySession.objects.order_by("pk").values())
    response = client.post(
        f"/admin/appointments/weeklysession/{session.pk}/change/",
        {
            "doctor": session.doctor_id,
            "branch": demo["MUM"].pk,  # moving a BLR session to MUM: MUM is not a choice
            "weekday": session.weekday,
            "start": session.start,
            "end": session.end,
        },
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert list(WeeklySession.objects.order_by("pk").values()) == before


def test_an_account_with_no_branches_sees_nothing_until_marked_network_wide(django_user_model, demo):
    user, client = _login(django_user_model, "new-admin")
    assert client.get("/admin/patients/patient/").context["cl"].result_count == 0
    assert client.get("/admin/billing/invoice/").context["cl"].result_count == 0
    network_wide(user)
    from billing.models import Invoice
    from patients.models import Patient

    client = Client()
    client.force_login(user)
    assert client.get("/admin/patients/patient/").context["cl"].result_count == Patient.objects.count() > 0
    assert client.get("/admin/billing/invoice/").context["cl"].result_count == Invoice.objects.count() > 0


def test_network_wide_wins_over_a_branch_list(django_user_model, demo):
    user, client = _login(django_user_model, "head-office")
    staff_of(user, demo["BLR"])
    StaffProfile.objects.filter(user=user).update(network_wide=True)
    from patients.models import Patient

    assert client.get("/admin/patients/patient/").context["cl"].result_count == Patient.objects.count()


def test_the_five_role_groups_exist_with_their_journeys_permissions():
    groups = {group.name: group for group in Group.objects.prefetch_related("permissions__content_type")}
    assert set(groups) >= set(ROLES)

    def perms(name: str) -> set[str]:
        return {f"{p.content_type.app_label}.{p.codename}" for p in groups[name].permissions.all()}

    assert {"patients.add_patient", "appointments.change_appointment"} <= perms("receptionist")
    assert not any(p.startswith(("lab.", "pharmacy.")) for p in perms("receptionist"))
    assert {"lab.add_labresult", "lab.change_laborder"} <= perms("lab technician")
    assert "billing.view_invoice" not in perms("lab technician")
    assert {"pharmacy.add_batch", "pharmacy.add_dispense"} <= perms("pharmacist")
    assert {"billing.change_invoice", "billing.add_payment", "billing.view_payment"} <= perms("accountant")
    assert "patients.change_patient" not in perms("accountant")
    assert "auth.change_user" in perms("administrator")
    assert "auth.change_user" not in perms("receptionist") | perms("accountant")


def test_a_receptionist_sees_only_front_desk_models_and_cannot_open_billing_changes(django_user_model, demo):
    user = django_user_model.objects.create_user("reception.blr", "r@clinic.invalid", None, is_staff=True)
    user.groups.add(Group.objects.get(name="receptionist"))
    staff_of(user, demo["BLR"])
    client = Client()
    client.force_login(user)
    assert client.get("/admin/patients/patient/").status_code == 200
    assert client.get("/admin/lab/laborder/").status_code == 403
    assert client.get("/admin/pharmacy/batch/").status_code == 403
    assert client.get("/admin/auth/user/").status_code == 403


def test_the_user_page_sets_branches_and_network_wide(admin_client, django_user_model, demo):
    user = django_user_model.objects.create_user("lab.mum", "l@clinic.invalid", None, is_staff=True)
    page = admin_client.get(f"/admin/auth/user/{user.pk}/change/").content.decode()
    assert "staff_profile-0-branches" in page
    assert "staff_profile-0-network_wide" in page


def test_counts_past_the_cap_say_more_than_ten_thousand(admin_client, monkeypatch, demo):
    from clinic import admin_pagination

    monkeypatch.setattr(admin_pagination, "COUNT_CAP", 3)
    page = admin_client.get("/admin/patients/patient/").content.decode()
    assert "more than 3 patients" in page


def test_yes_no_columns_read_in_words_in_every_list(admin_client, demo):
    for url in ("/admin/clinic/branch/", "/admin/auth/user/", "/admin/patients/visit/", "/admin/billing/invoice/"):
        page = admin_client.get(url).content.decode()
        assert "icon-yes.svg" not in page, url
        assert "icon-no.svg" not in page, url
    branches = admin_client.get("/admin/clinic/branch/").content.decode()
    assert '<td class="field-is_active_in_words">Yes</td>' in branches


def test_the_home_page_tells_an_account_without_branches_why_its_lists_are_empty(django_user_model, demo):
    user, client = _login(django_user_model, "new-admin")
    assert "Your account works at no branch yet" in client.get("/admin/").content.decode()
    staff_of(user, demo["BLR"])
    client = Client()
    client.force_login(user)
    assert "Your account works at no branch yet" not in client.get("/admin/").content.decode()


def test_the_patient_lists_search_box_alone_goes_to_the_ranked_find_page(admin_client, demo):
    response = admin_client.get("/admin/patients/patient/?q=Manj+Varma")
    assert (response.status_code, response["Location"]) == (302, "/admin/patients/patient/find/?q=Manj+Varma")
    with_a_filter = admin_client.get("/admin/patients/patient/?q=Sharma&gender__exact=female")
    assert with_a_filter.status_code == 200
    assert all(patient.gender == "female" for patient in with_a_filter.context["cl"].result_list)


def test_an_invoice_number_or_patient_id_typed_whole_finds_exactly_its_invoices(django_user_model, demo):
    from billing.models import Invoice

    user, client = _login(django_user_model, "blr-accounts")
    staff_of(user, demo["BLR"])
    mine = Invoice.objects.filter(branch=demo["BLR"], invoice_number__isnull=False).first()
    theirs = Invoice.objects.filter(branch=demo["MUM"], invoice_number__isnull=False).first()
    found = client.get("/admin/billing/invoice/", {"q": mine.invoice_number.lower()}).context["cl"].result_list
    assert [invoice.pk for invoice in found] == [mine.pk]
    by_patient = client.get("/admin/billing/invoice/", {"q": mine.patient.patient_id}).context["cl"].result_list
    assert {invoice.pk for invoice in by_patient} == set(
        Invoice.objects.filter(branch=demo["BLR"], patient=mine.patient).values_list("pk", flat=True)
    )
    # Another branch's number finds nothing, exactly as an unknown one.
    assert list(client.get("/admin/billing/invoice/", {"q": theirs.invoice_number}).context["cl"].result_list) == []
