"""The accounts journeys and the home page per role in Chromium at 1366x768, each logged in as a branch staff
member of the role's group (not a superuser): the accountant's home page charts today's collections, leads
to the collections page and downloads its CSV; the invoice page fits the screen's width; the receptionist's
home page shows the queue and no accounts section."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from billing import services
from clinic.roles import ACCOUNTANT, RECEPTIONIST
from integrations.models import AuditLogEntry
from tests.appointments.factories import AppointmentFactory, at
from tests.billing.factories import line, make_invoice, pay
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory, staff_of
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)


def log_in_as(page: Any, live_server: Any, user: Any) -> Any:
    """The browser carries the session of `user` (logged in through Django's test client)."""
    client = Client()
    client.force_login(user)
    cookie = client.cookies["sessionid"]
    page.context.add_cookies([{"name": "sessionid", "value": cookie.value, "url": live_server.url}])
    page.set_viewport_size({"width": 1366, "height": 768})
    return page


def staff(django_user_model: Any, name: str, role: str, *branches: Any) -> Any:
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return staff_of(user, *branches)


@pytest.fixture
def blr() -> Any:
    return BranchFactory(code="BLR", name="Bengaluru Central Clinic", state="Karnataka", time_zone="Asia/Kolkata")


def test_an_accountant_follows_todays_collections_from_the_home_page_to_the_csv(
    page, live_server, blr, django_user_model
):
    medicine, ortho = DepartmentFactory(name="General Medicine"), DepartmentFactory(name="Orthopaedics")
    patient = PatientFactory(registration_branch=blr, address_state="Karnataka")
    invoice = make_invoice(
        branch=blr, patient=patient, lines=[line(medicine), line(ortho, rate="500.00", tax_rate="0")]
    )
    pay(invoice, "1000.00")
    pay(invoice, "680.00", mode="upi", reference="UPI-1")
    services.refund_record(invoice=invoice, amount=Decimal("80.00"), payment_mode="cash")
    accountant = staff(django_user_model, "accounts.blr", ACCOUNTANT, blr)
    log_in_as(page, live_server, accountant)

    page.goto("/admin/")
    section = page.locator("#dashboard-accounts")
    assert section.locator("h2").inner_text() == "Accounts: today's collections"
    assert section.locator(".dashboard-card .value").inner_text() == "1600.00"
    chart = section.locator("svg.dashboard-chart").first
    assert chart.locator("title").text_content() == "Today's collections by payment mode (rupees)"
    assert "Cash: 920.00" in chart.locator("desc").text_content()
    assert page.locator("#dashboard-reception").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366

    section.locator(".dashboard-card").click()
    page.wait_for_url("**/admin/billing/payment/collections/")
    assert page.locator("#collections-net").inner_text() == "1600.00"
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366
    rows = page.locator("#collections-by-department tbody tr").all_inner_texts()
    assert rows[:2] == ["General Medicine\t1180.00\t56.19\t1123.81", "Orthopaedics\t500.00\t23.81\t476.19"]

    with page.expect_download() as download_info:
        page.click("#collections-csv")
    download = download_info.value
    today = timezone.localtime(timezone.now(), blr.zone).date().isoformat()
    assert download.suggested_filename == f"collections-BLR-{today}.csv"
    with open(download.path(), encoding="utf-8") as saved:
        table = list(csv.reader(io.StringIO(saved.read())))
    assert table[-1] == ["BLR", today, "Total", "All", "1680.00", "80.00", "1600.00"]
    audit = AuditLogEntry.objects.get(path__contains="export=csv")
    assert (audit.actor, audit.patient_ids) == ("staff:accounts.blr", [])


def test_the_invoice_page_fits_a_1366_pixel_screen(page, live_server, blr, django_user_model):
    medicine = DepartmentFactory(name="General Medicine")
    patient = PatientFactory(registration_branch=blr, address_state="Karnataka", first_name="Priya")
    draft = make_invoice(branch=blr, patient=patient, lines=[line(medicine)], finalize=False)
    paid = make_invoice(branch=blr, patient=patient, lines=[line(medicine)])
    pay(paid, "1180.00", mode="card", reference="CARD-1")
    services.refund_record(invoice=paid, amount=Decimal("100.00"), payment_mode="cash")
    accountant = staff(django_user_model, "accounts.blr", ACCOUNTANT, blr)
    log_in_as(page, live_server, accountant)

    for invoice in (draft, paid):
        page.goto(f"/admin/billing/invoice/{invoice.pk}/change/")
        assert page.locator("#line_items-group").is_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1366, f"{invoice}: {width} px"
    page.goto("/admin/billing/invoice/add/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366


def test_a_receptionists_home_page_shows_the_queue_and_not_the_accounts(page, live_server, blr, django_user_model):
    today = timezone.localtime(timezone.now(), blr.zone).date()
    doctor = DoctorFactory(name="Dr. Ananya Rao", branches=[blr])
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(today, 9, 0, blr))
    AppointmentFactory(
        doctor=doctor,
        branch=blr,
        slot_start=at(today, 9, 15, blr),
        status="checked_in",
        checked_in_at=timezone.now() - timedelta(minutes=25),
    )
    desk = staff(django_user_model, "reception.blr", RECEPTIONIST, blr)
    log_in_as(page, live_server, desk)

    page.goto("/admin/")
    assert page.locator("#dashboard-reception h2").inner_text() == "Front desk: today's queue"
    row = page.locator(".dashboard-queue tbody tr").first.inner_text()
    assert row.split("\t")[:6] == ["Dr. Ananya Rao", "BLR", "1", "1", "0", "0"]
    assert row.split("\t")[6] in ("25 min", "26 min")
    assert page.locator("#dashboard-accounts").count() == 0
    assert page.locator("#dashboard-laboratory").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= 1366

    page.locator(".dashboard-queue tbody tr").first.locator("td.count a").nth(1).click()
    page.wait_for_url("**/admin/appointments/appointment/?*status__exact=checked_in*")
    assert page.locator("#result_list tbody tr").count() == 1
