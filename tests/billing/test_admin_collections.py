"""The day's collections in the admin (billing.admin_collections): by payment mode and by department for a
branch of the staff member's and its local day, refunds taken off, the CSV of the same numbers (audited),
and who may not see them (403 without the accounts permissions, 404 for another branch's id)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from billing import services
from billing.models import Payment, Refund
from billing.selectors import CollectionRow, _rounded, collections_of_day
from clinic.roles import ACCOUNTANT, PHARMACIST, RECEPTIONIST
from clinic.staff import staff_reader
from integrations.models import AuditLogEntry
from tests.billing.factories import line, make_invoice, pay
from tests.factories import staff_of
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

D = Decimal
DAY = date(2026, 11, 2)
PAGE = "/admin/billing/payment/collections/"


def staff(django_user_model: Any, name: str, role: str, *branches: Any) -> Any:
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return staff_of(user, *branches)


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def day_at_blr(blr, mum, patient, medicine, ortho) -> dict[str, Any]:
    """At BLR on DAY: invoice A (medicine 1180.00 + orthopaedics 500.00 = 1680.00) paid 840.00 cash and 840.00
    UPI, 100.00 cash refunded; invoice B (medicine 1180.00) paid 1180.00 by card. Around it: a BLR payment the
    next day and a MUM payment the same day, neither of BLR's DAY."""
    a = make_invoice(
        branch=blr, patient=patient, lines=[line(medicine), line(ortho, rate="500.00", tax_rate="0")], on=DAY
    )
    b = make_invoice(branch=blr, patient=patient, lines=[line(medicine)], on=DAY)
    pay(a, "840.00", on=DAY)
    pay(a, "840.00", mode="upi", reference="UPI-1", on=DAY)
    pay(b, "1180.00", mode="card", reference="CARD-1", on=DAY)
    services.refund_record(invoice=a, amount=D("100.00"), payment_mode="cash", refund_date=DAY)
    later = make_invoice(branch=blr, patient=patient, lines=[line(medicine)], on=DAY)
    pay(later, "50.00", on=date(2026, 11, 3))
    elsewhere = make_invoice(branch=mum, patient=PatientFactory(registration_branch=mum), department=medicine, on=DAY)
    pay(elsewhere, "999.00", on=DAY)
    return {"a": a, "b": b}


def rows(items: list[CollectionRow]) -> list[tuple[str, D, D, D]]:
    return [(row.label, row.received, row.refunded, row.net) for row in items]


def test_the_days_collections_by_mode_and_department_deduct_refunds_and_leave_other_branches_out(
    day_at_blr, blr, django_user_model
):
    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr)
    found = collections_of_day(client=staff_reader(accountant), day=DAY)

    assert rows(found.by_mode) == [
        ("Cash", D("840.00"), D("100.00"), D("740.00")),
        ("Card", D("1180.00"), D("0.00"), D("1180.00")),
        ("UPI", D("840.00"), D("0.00"), D("840.00")),
        ("NEFT", D("0.00"), D("0.00"), D("0.00")),
        ("Cheque", D("0.00"), D("0.00"), D("0.00")),
        ("Online", D("0.00"), D("0.00"), D("0.00")),
        ("Insurance", D("0.00"), D("0.00"), D("0.00")),
    ]
    # A's 840.00 payments split 1180 : 500 (590.00 + 250.00 each); the 100.00 refund 70.24 + 29.76 (the odd
    # paisa to the larger remainder); B is all medicine.
    assert rows(found.by_department) == [
        ("General Medicine", D("2360.00"), D("70.24"), D("2289.76")),
        ("Orthopaedics", D("500.00"), D("29.76"), D("470.24")),
    ]
    assert (found.received, found.refunded, found.net) == (D("2860.00"), D("100.00"), D("2760.00"))


def test_shares_are_rounded_to_the_paisa_and_add_up_to_the_total():
    third = D(100) / D(3)
    assert _rounded(D("100.00"), {"a": third, "b": third, "c": third}) == {
        "a": D("33.34"),
        "b": D("33.33"),
        "c": D("33.33"),
    }
    # Money no line covers (an invoice of 0.00 paid back and forth) is shown as such, never lost.
    assert _rounded(D("10.00"), {"a": D("6.00")}) == {"a": D("6.00"), "No department": D("4.00")}


def test_the_page_shows_the_numbers_of_the_chosen_branch_and_day(day_at_blr, blr, mum, django_user_model):
    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr, mum)
    response = client_of(accountant).get(PAGE, {"branch": str(blr.pk), "day": "2026-11-02"})

    assert response.status_code == 200
    shown = response.context["collections"]
    assert (shown.day, shown.received, shown.refunded, shown.net) == (DAY, D("2860.00"), D("100.00"), D("2760.00"))
    html = response.content.decode()
    assert 'id="collections-net">2760.00<' in html
    assert '<td>General Medicine</td><td class="money">2360.00</td>' in html
    mum_page = client_of(accountant).get(PAGE, {"branch": str(mum.pk), "day": "2026-11-02"})
    assert (mum_page.context["collections"].received, mum_page.context["collections"].net) == (
        D("999.00"),
        D("999.00"),
    )


def test_the_csv_holds_the_same_numbers_and_is_audited(day_at_blr, blr, django_user_model):
    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr)
    response = client_of(accountant).get(PAGE, {"branch": str(blr.pk), "day": "2026-11-02", "export": "csv"})

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="collections-BLR-2026-11-02.csv"'
    table = list(csv.reader(io.StringIO(response.content.decode())))
    assert table == [
        ["Branch", "Day", "Breakdown", "Name", "Received", "Refunded", "Net"],
        ["BLR", "2026-11-02", "Payment mode", "Cash", "840.00", "100.00", "740.00"],
        ["BLR", "2026-11-02", "Payment mode", "Card", "1180.00", "0.00", "1180.00"],
        ["BLR", "2026-11-02", "Payment mode", "UPI", "840.00", "0.00", "840.00"],
        ["BLR", "2026-11-02", "Payment mode", "NEFT", "0.00", "0.00", "0.00"],
        ["BLR", "2026-11-02", "Payment mode", "Cheque", "0.00", "0.00", "0.00"],
        ["BLR", "2026-11-02", "Payment mode", "Online", "0.00", "0.00", "0.00"],
        ["BLR", "2026-11-02", "Payment mode", "Insurance", "0.00", "0.00", "0.00"],
        ["BLR", "2026-11-02", "Department", "General Medicine", "2360.00", "70.24", "2289.76"],
        ["BLR", "2026-11-02", "Department", "Orthopaedics", "500.00", "29.76", "470.24"],
        ["BLR", "2026-11-02", "Total", "All", "2860.00", "100.00", "2760.00"],
    ]
    audit = AuditLogEntry.objects.get()
    assert (audit.actor, audit.client_id, audit.patient_ids, audit.status, audit.method) == (
        "staff:acc",
        None,
        [],
        200,
        "GET",
    )
    assert audit.path == f"{PAGE}?branch={blr.pk}&day=2026-11-02&export=csv"


def test_the_day_is_the_branchs_local_day(blr, patient, medicine, django_user_model, monkeypatch):
    """23:50 in Bengaluru is 18:20 UTC, still 2 November there; 00:10 is the 3rd, though UTC says the 2nd."""
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=DAY)
    monkeypatch.setattr(timezone, "now", lambda: datetime(2026, 11, 2, 18, 20, tzinfo=UTC))
    pay(invoice, "100.00")
    monkeypatch.setattr(timezone, "now", lambda: datetime(2026, 11, 2, 18, 40, tzinfo=UTC))
    pay(invoice, "30.00", mode="card", reference="C-2")
    assert sorted(Payment.objects.values_list("payment_date", "amount")) == [
        (date(2026, 11, 2), D("100.00")),
        (date(2026, 11, 3), D("30.00")),
    ]

    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr)
    today = client_of(accountant).get(PAGE)  # the branch's today: 3 November, though UTC is on the 2nd
    assert (today.context["collections"].day, today.context["collections"].received) == (date(2026, 11, 3), D("30.00"))
    second = collections_of_day(client=staff_reader(accountant), day=DAY)
    assert second.received == D("100.00")


def test_a_pharmacist_and_a_receptionist_are_refused_and_nothing_is_exported(day_at_blr, blr, django_user_model):
    for name, role in (("pharm", PHARMACIST), ("desk", RECEPTIONIST)):
        user = staff(django_user_model, name, role, blr)
        for query in ({"branch": str(blr.pk)}, {"branch": str(blr.pk), "day": "2026-11-02", "export": "csv"}):
            assert client_of(user).get(PAGE, query).status_code == 403
    assert AuditLogEntry.objects.count() == 0


def test_another_branchs_accountant_cannot_see_its_numbers(day_at_blr, blr, mum, django_user_model):
    accountant = staff(django_user_model, "acc.mum", ACCOUNTANT, mum)
    client = client_of(accountant)
    refused = client.get(PAGE, {"branch": str(blr.pk), "day": "2026-11-02"})
    assert refused.status_code == 404
    assert client.get(PAGE, {"branch": str(blr.pk), "day": "2026-11-02", "export": "csv"}).status_code == 404
    own = client.get(PAGE, {"day": "2026-11-02"})  # the default branch is their own
    assert (own.context["branch"], own.context["collections"].received) == (mum, D("999.00"))
    assert str(blr.pk) not in own.content.decode()
    assert collections_of_day(client=staff_reader(accountant), day=DAY, branch_ids=[blr.pk]).received == D("0.00")
    assert AuditLogEntry.objects.count() == 0


def test_bad_input_is_a_form_error(blr, django_user_model):
    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr)
    response = client_of(accountant).get(PAGE, {"branch": str(blr.pk), "day": "2 Nov"})
    assert response.status_code == 200
    assert response.context["collections"] is None
    assert response.context["form"].errors == {"day": ["Enter a valid date."]}
    malformed = client_of(accountant).get(PAGE, {"branch": "not-a-branch"})
    assert malformed.status_code == 200
    assert "branch" in malformed.context["form"].errors


def test_the_payments_list_links_to_the_collections_for_accountants_only(blr, django_user_model):
    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr)
    desk = staff(django_user_model, "desk", RECEPTIONIST, blr)
    assert f'href="{PAGE}"' in client_of(accountant).get("/admin/billing/payment/").content.decode()
    assert f'href="{PAGE}"' not in client_of(desk).get("/admin/billing/payment/").content.decode()
    assert Refund.objects.count() == 0


def test_the_page_makes_the_same_number_of_queries_whatever_the_days_payments(
    blr, patient, medicine, django_user_model
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    accountant = staff(django_user_model, "acc", ACCOUNTANT, blr)
    client = client_of(accountant)
    query = {"branch": str(blr.pk), "day": "2026-11-02"}
    pay(make_invoice(branch=blr, patient=patient, department=medicine, on=DAY), "100.00", on=DAY)
    client.get(PAGE, query)
    with CaptureQueriesContext(connection) as one:
        client.get(PAGE, query)
    for n in range(4):
        pay(make_invoice(branch=blr, patient=patient, department=medicine, on=DAY), f"{n + 1}0.00", on=DAY)
    with CaptureQueriesContext(connection) as five:
        response = client.get(PAGE, query)
    assert len(five.captured_queries) == len(one.captured_queries)
    assert response.context["collections"].received == D("200.00")
