"""Times in the branch's time zone on every admin page (CONTRACT §22; clinic.admin_time): a staff member of
one branch reads every list and page in that branch's zone; a row's own page is in its branch's zone for
anyone; a network-wide account over several zones reads lists in the server's TIME_ZONE."""

from __future__ import annotations

import zoneinfo
from datetime import date
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import formats, timezone

from tests.billing.factories import make_invoice, pay
from tests.factories import network_wide, staff_of

pytestmark = pytest.mark.django_db

DUBAI = zoneinfo.ZoneInfo("Asia/Dubai")  # UTC+4, 90 minutes behind the server's Asia/Kolkata
KOLKATA = zoneinfo.ZoneInfo("Asia/Kolkata")


def shown(moment: Any, zone: zoneinfo.ZoneInfo) -> str:
    """How the admin prints a date and time (Django's own formatting) in `zone`."""
    return str(formats.localize(timezone.localtime(moment, zone)))


@pytest.fixture
def dubai_payment(mum, patient, medicine):
    mum.time_zone = "Asia/Dubai"
    mum.save(update_fields=["time_zone"])
    invoice = make_invoice(branch=mum, patient=patient, department=medicine, on=date(2026, 4, 1))
    return pay(invoice, "100.00", mode="cash", on=date(2026, 4, 1))


def _client_of(django_user_model: Any, name: str) -> tuple[Any, Client]:
    user = django_user_model.objects.create_superuser(name, f"{name}@clinic.invalid", None)
    client = Client()
    client.force_login(user)
    return user, client


def test_a_member_of_a_branch_in_another_zone_reads_the_list_and_the_page_in_it(django_user_model, mum, dubai_payment):
    user, client = _client_of(django_user_model, "dxb-accounts")
    staff_of(user, mum)

    listed = client.get(reverse("admin:billing_payment_changelist"))
    page = client.get(reverse("admin:billing_payment_change", args=[dubai_payment.pk]))

    assert listed.status_code == page.status_code == 200
    for response in (listed, page):
        text = response.content.decode()
        assert shown(dubai_payment.recorded_at, DUBAI) in text
        assert shown(dubai_payment.recorded_at, KOLKATA) not in text


def test_a_network_wide_account_reads_a_rows_page_in_its_branchs_zone_and_lists_in_the_servers(
    django_user_model, blr, mum, patient, medicine, dubai_payment
):
    user, client = _client_of(django_user_model, "head-office")
    network_wide(user)
    at_blr = pay(make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 4, 1)), "50.00")

    listed = client.get(reverse("admin:billing_payment_changelist")).content.decode()
    dubai_page = client.get(reverse("admin:billing_payment_change", args=[dubai_payment.pk])).content.decode()
    blr_page = client.get(reverse("admin:billing_payment_change", args=[at_blr.pk])).content.decode()

    # Two zones among its branches: the list in the server's TIME_ZONE, each page in its row's branch's.
    assert shown(dubai_payment.recorded_at, KOLKATA) in listed
    assert shown(dubai_payment.recorded_at, DUBAI) in dubai_page
    assert shown(dubai_payment.recorded_at, KOLKATA) not in dubai_page
    assert shown(at_blr.recorded_at, KOLKATA) in blr_page
    # The server's zone is untouched once the request is over.
    assert timezone.get_current_timezone_name() == "Asia/Kolkata"


def test_a_page_of_another_branchs_row_stays_not_found_whatever_its_zone(django_user_model, blr, dubai_payment):
    user, client = _client_of(django_user_model, "blr-accounts")
    staff_of(user, blr)

    response = client.get(reverse("admin:billing_payment_change", args=[dubai_payment.pk]))
    malformed = client.get(reverse("admin:billing_payment_change", args=["not-a-uuid"]))

    assert response.status_code == malformed.status_code == 302  # to the index, as for an unknown id
    assert shown(dubai_payment.recorded_at, DUBAI) not in response.content.decode()
