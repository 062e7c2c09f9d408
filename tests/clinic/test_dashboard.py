"""The admin's home page per role (clinic.dashboard) and the index grouped by work (clinic.admin_sections):
each role sees its sections only, every number counts the rows of the staff member's branches only, and each
link opens a list that shows the same number."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from appointments.models import Appointment
from clinic.roles import ACCOUNTANT, ADMINISTRATOR, LAB_TECHNICIAN, PHARMACIST, RECEPTIONIST
from lab import services as lab_services
from lab.models import LabOrder, LabResult, OrderStatus, Priority
from pharmacy import services as pharmacy_services
from pharmacy.models import ReorderLevel
from tests.appointments.factories import AppointmentFactory, at
from tests.billing.factories import make_invoice, pay
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory, network_wide, staff_of
from tests.lab.order_factories import AnalyteFactory, LabTestFactory
from tests.patients.factories import PatientFactory
from tests.pharmacy.factories import DrugFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/appointments/appointment/"


def staff(django_user_model: Any, name: str, role: str, *branches: Any) -> Any:
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return staff_of(user, *branches)


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def sections(response: Any) -> dict[str, Any]:
    return {section.key: section for section in response.context["dashboard"]}


def cards(section: Any) -> dict[str, tuple[Any, str]]:
    return {card.label: (card.value, card.url) for card in section.cards}


@pytest.fixture
def world(db: None) -> dict[str, Any]:
    blr = BranchFactory(code="BLR", name="Bengaluru", time_zone="Asia/Kolkata")
    mum = BranchFactory(code="MUM", name="Mumbai", state="Maharashtra", time_zone="Asia/Kolkata")
    return {"blr": blr, "mum": mum, "today": timezone.localtime(timezone.now(), blr.zone).date()}


@pytest.fixture
def queue(world) -> dict[str, Any]:
    """Today at BLR: Dr. Rao 2 booked, 2 checked in (40 and 10 minutes ago), 1 completed, 1 no-show, 1
    cancelled; Dr. Mehta 1 checked in (5 minutes ago). Not counted: Dr. Mehta's 2 at MUM today and Dr. Rao's
    booking at BLR yesterday."""
    blr, mum, today = world["blr"], world["mum"], world["today"]
    rao = DoctorFactory(name="Dr. Rao", branches=[blr])
    mehta = DoctorFactory(name="Dr. Mehta", branches=[blr, mum])
    now = timezone.now()
    rows = [
        (rao, blr, "booked", None),
        (rao, blr, "booked", None),
        (rao, blr, "checked_in", now - timedelta(minutes=40)),
        (rao, blr, "checked_in", now - timedelta(minutes=10)),
        (rao, blr, "completed", None),
        (rao, blr, "no_show", None),
        (rao, blr, "cancelled", None),
        (mehta, blr, "checked_in", now - timedelta(minutes=5)),
        (mehta, mum, "booked", None),
        (mehta, mum, "checked_in", now - timedelta(minutes=90)),
    ]
    for hour, (doctor, branch, status, checked_in_at) in enumerate(rows):
        start = at(today, 8 + hour, 0, branch)
        extra = {"cancelled_at": now, "cancellation_reason": "x"} if status == "cancelled" else {}
        AppointmentFactory(
            doctor=doctor, branch=branch, slot_start=start, status=status, checked_in_at=checked_in_at, **extra
        )
    AppointmentFactory(doctor=rao, branch=blr, slot_start=at(today - timedelta(days=1), 9, 0, blr))
    return {"rao": rao, "mehta": mehta}


def test_the_receptionists_home_page_shows_todays_queue_per_doctor_of_their_branch_only(
    world, queue, django_user_model
):
    desk = staff(django_user_model, "desk", RECEPTIONIST, world["blr"])
    client = client_of(desk)
    response = client.get("/admin/")

    assert response.status_code == 200
    shown = sections(response)
    assert list(shown) == ["reception"]  # no lab, pharmacy nor accounts section
    rows = [(row.queue.doctor_name, row.queue.branch_code, row.queue.counts) for row in shown["reception"].queue]
    assert rows == [
        ("Dr. Mehta", "BLR", {"booked": 0, "checked_in": 1, "completed": 0, "cancelled": 0, "no_show": 0}),
        ("Dr. Rao", "BLR", {"booked": 2, "checked_in": 2, "completed": 1, "cancelled": 0, "no_show": 1}),
    ]
    assert [row.waiting for row in shown["reception"].queue] == ["5 min", "40 min"]
    waiting, url = cards(shown["reception"])["Checked in, waiting"]
    assert waiting == 3
    assert client.get(url).context["cl"].result_count == 3
    html = response.content.decode()
    assert "Patients checked in and waiting, per doctor" in html
    assert "Dr. Rao (BLR): 2" in html  # the chart's values as text
    assert 'id="dashboard-accounts"' not in html

    # Every count links to the list filtered by branch, doctor, day and status, which shows as many rows.
    rao = shown["reception"].queue[1]
    for (count, url), status in zip(rao.cells, ("booked", "checked_in", "completed", "no_show"), strict=True):
        assert f"doctor__id__exact={queue['rao'].pk}" in url
        assert f"status__exact={status}" in url
        listed = client.get(url)
        assert listed.status_code == 200
        assert listed.context["cl"].result_count == count


def test_the_lab_technicians_home_page_counts_open_orders_stat_first_and_unacknowledged_critical_results(
    world, django_user_model
):
    blr, mum = world["blr"], world["mum"]
    doctor = DoctorFactory(branches=[blr, mum])
    cbc = LabTestFactory(code="CBC")
    hb = AnalyteFactory(test=cbc, code="HB")
    patient = PatientFactory(registration_branch=blr)

    def order(branch: Any, priority: str) -> LabOrder:
        return lab_services.lab_order_create(
            branch=branch, patient=patient, doctor=doctor, tests=[cbc], priority=priority, ordered_by="test"
        )

    def critical(order: LabOrder, status: str = "preliminary", acknowledged: bool = False) -> None:
        LabResult.objects.create(
            item=order.items.get(), analyte=hb, status=status, value_quantity=Decimal("4.1"), unit="g/dL",
            flag="LL", performed_at=timezone.now(), performer="Lab",
            critical_acknowledged_at=timezone.now() if acknowledged else None,
            critical_acknowledged_by="staff:asha" if acknowledged else "",
        )  # fmt: skip

    stat = order(blr, Priority.STAT)
    critical(stat)
    order(blr, Priority.ROUTINE)
    order(blr, Priority.URGENT)
    done = order(blr, Priority.STAT)
    LabOrder.objects.filter(pk=done.pk).update(status=OrderStatus.FINAL)
    critical(done, status="final", acknowledged=True)  # told the doctor: off the list
    elsewhere = order(mum, Priority.STAT)
    critical(elsewhere)

    tech = staff(django_user_model, "lab", LAB_TECHNICIAN, blr)
    client = client_of(tech)
    shown = sections(client.get("/admin/"))
    assert list(shown) == ["laboratory"]
    numbers = cards(shown["laboratory"])
    assert {label: value for label, (value, _) in numbers.items()} == {
        "Stat orders open": 1,
        "Urgent orders open": 1,
        "All open orders": 3,
        "Orders with an unacknowledged critical result": 1,
    }
    for label, (value, url) in numbers.items():
        listed = client.get(url)
        assert listed.status_code == 200, label
        assert listed.context["cl"].result_count == value, label
    assert [order.pk for order in client.get(numbers["Orders with an unacknowledged critical result"][1]).context["cl"].result_list] == [stat.pk]  # fmt: skip


def test_the_pharmacists_home_page_counts_low_stock_and_expiring_batches_of_their_branch(
    world, django_user_model, settings
):
    settings.PHARMACY_EXPIRY_WARNING_DAYS = 60
    blr, mum, today = world["blr"], world["mum"], timezone.localdate()
    low, plenty = DrugFactory(code="PARA"), DrugFactory(code="AMOX")

    def receive(branch: Any, drug: Any, number: str, days: int, quantity: int) -> None:
        pharmacy_services.stock_receive(
            branch=branch, drug=drug, batch_number=number, expiry_date=today + timedelta(days=days),
            quantity=quantity, unit_cost=Decimal("1.00"), mrp=Decimal("2.00"), actor="test",
        )  # fmt: skip

    ReorderLevel.objects.create(drug=low, branch=blr, level=100)
    ReorderLevel.objects.create(drug=plenty, branch=blr, level=10)
    ReorderLevel.objects.create(drug=low, branch=mum, level=1000)
    receive(blr, low, "P-1", 30, 10)
    receive(blr, plenty, "A-1", 200, 50)
    receive(mum, low, "P-M", 10, 5)

    pharmacist = staff(django_user_model, "pharm", PHARMACIST, blr)
    client = client_of(pharmacist)
    shown = sections(client.get("/admin/"))
    assert list(shown) == ["pharmacy"]
    numbers = cards(shown["pharmacy"])
    value, url = numbers["Drugs below reorder level"]
    assert (value, url) == (1, "/admin/pharmacy/reorderlevel/?stock=below")
    assert [(level.drug.code, level.branch.code) for level in client.get(url).context["cl"].result_list] == [
        ("PARA", "BLR")
    ]
    value, url = numbers["Batches in stock expiring within 60 days"]
    assert (value, url) == (1, "/admin/pharmacy/batch/?expiry=expiring&quantity_on_hand__gt=0")
    listed = client.get(url)
    assert [batch.batch_number for batch in listed.context["cl"].result_list] == ["P-1"]


def test_the_accountants_home_page_charts_todays_collections_by_mode_and_department(world, django_user_model):
    blr, mum = world["blr"], world["mum"]
    medicine = DepartmentFactory(name="General Medicine")
    patient = PatientFactory(registration_branch=blr, address_state="Karnataka")
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    pay(invoice, "500.00")
    pay(invoice, "180.00", mode="upi", reference="UPI-9")
    other = make_invoice(branch=mum, patient=PatientFactory(registration_branch=mum), department=medicine)
    pay(other, "700.00")

    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr)
    response = client_of(accountant).get("/admin/")
    shown = sections(response)
    assert list(shown) == ["accounts"]
    assert cards(shown["accounts"]) == {
        "Collected today (net of refunds)": (Decimal("680.00"), "/admin/billing/payment/collections/")
    }
    html = response.content.decode()
    assert "<title id=" in html
    assert "Today&#x27;s collections by payment mode (rupees)</title>" in html
    assert "Cash: 500.00; Card: 0.00; UPI: 180.00" in html
    assert "General Medicine: 680.00" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing from another host


def test_an_administrator_sees_every_section_and_a_superuser_without_branches_sees_no_numbers(
    world, queue, django_user_model
):
    manager = network_wide(staff(django_user_model, "manager", ADMINISTRATOR))
    shown = sections(client_of(manager).get("/admin/"))
    assert list(shown) == ["reception", "laboratory", "pharmacy", "accounts"]
    assert cards(shown["reception"])["Checked in, waiting"][0] == 4  # both branches

    root = django_user_model.objects.create_superuser("root", password="pw")
    shown = sections(client_of(root).get("/admin/"))
    assert cards(shown["reception"])["Checked in, waiting"][0] == 0
    assert shown["reception"].queue == []


def test_the_home_page_makes_the_same_number_of_queries_whatever_the_number_of_doctors(world, queue, django_user_model):
    manager = network_wide(staff(django_user_model, "manager", ADMINISTRATOR))
    client = client_of(manager)
    client.get("/admin/")
    with CaptureQueriesContext(connection) as few:
        client.get("/admin/")
    for n in range(5):
        AppointmentFactory(
            doctor=DoctorFactory(branches=[world["blr"]]), branch=world["blr"], slot_start=at(world["today"], 8, n, world["blr"])
        )  # fmt: skip
    with CaptureQueriesContext(connection) as many:
        client.get("/admin/")
    assert len(many.captured_queries) == len(few.captured_queries)
    assert Appointment.objects.filter(local_date=world["today"]).count() == 15


def test_the_index_groups_the_models_by_work_under_plain_names(admin_client):
    response = admin_client.get("/admin/")
    groups = {
        app["name"]: sorted(model["object_name"] for model in app["models"]) for app in response.context["app_list"]
    }
    assert list(groups)[:8] == [
        "Front desk",
        "Laboratory",
        "Pharmacy",
        "Accounts",
        "Clinic setup",
        "Integrations",
        "Records and audit",
        "Access and security",
    ]
    assert groups["Front desk"] == ["Allergy", "Appointment", "Diagnosis", "Medication", "Patient", "Visit"]
    assert groups["Clinic setup"] == ["Branch", "BranchHoliday", "Department", "Doctor", "DoctorLeave", "WeeklySession"]
    assert groups["Records and audit"] == ["AuditLogEntry", "RecordChange"]
    assert groups["Access and security"] == [
        "AccessAttempt", "AccessFailureLog", "AccessLog", "AccessToken", "Group", "TOTPDevice", "User",
    ]  # fmt: skip
    assert "Invoice" in groups["Accounts"]
    assert "Payment" in groups["Accounts"]
    assert "AuditLogEntry" not in groups["Integrations"]
    # An app's own index page is Django's, ungrouped.
    billing = admin_client.get("/admin/billing/")
    assert [app["app_label"] for app in billing.context["app_list"]] == ["billing"]
    html = response.content.decode()
    assert re.search(r'<a href="/admin/#front-desk"[^>]*>Front desk</a>', html)


def test_a_receptionists_index_lists_only_what_the_role_may_open(world, django_user_model):
    desk = staff(django_user_model, "desk", RECEPTIONIST, world["blr"])
    groups = [app["name"] for app in client_of(desk).get("/admin/").context["app_list"]]
    assert groups == ["Front desk", "Accounts", "Clinic setup"]


def test_a_card_past_its_cap_says_more_than(world, django_user_model, monkeypatch):
    from clinic import dashboard

    monkeypatch.setattr(dashboard, "CARD_COUNT_CAP", 0)
    blr = world["blr"]
    cbc = LabTestFactory(code="CBC")
    hb = AnalyteFactory(test=cbc, code="HB")
    order = lab_services.lab_order_create(
        branch=blr, patient=PatientFactory(registration_branch=blr), doctor=DoctorFactory(branches=[blr]),
        tests=[cbc], priority=Priority.ROUTINE, ordered_by="test",
    )  # fmt: skip
    LabResult.objects.create(
        item=order.items.get(), analyte=hb, status="preliminary", value_quantity=Decimal("4.1"), unit="g/dL",
        flag="LL", performed_at=timezone.now(), performer="Lab",
    )  # fmt: skip
    client = client_of(staff(django_user_model, "lab", LAB_TECHNICIAN, blr))
    numbers = cards(sections(client.get("/admin/"))["laboratory"])
    assert numbers["Orders with an unacknowledged critical result"][0] == "more than 0"
