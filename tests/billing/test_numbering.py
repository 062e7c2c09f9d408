"""Invoice numbers: per branch, per Indian financial year of the invoice date, consecutive, never reused."""

from __future__ import annotations

from datetime import UTC, date, datetime
from unittest import mock

import pytest
from django.db import transaction

from billing import services
from billing.models import Invoice, InvoiceNumberCounter
from billing.numbering import financial_year, format_invoice_number
from tests.billing.factories import INVOICES, body, make_invoice, post_json
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db


def create(client, token, patient, branch, day, medicine, finalize=True):
    payload = {
        "patient_id": str(patient.id),
        "branch_id": str(branch.id),
        "line_items": [{"service_name": "Consultation", "department": medicine.name, "rate": 500, "tax_rate": 0}],
        "finalize": finalize,
    }
    if day is not None:
        payload["date"] = day
    response = post_json(client, token, INVOICES, payload)
    assert response.status_code == 201, response.content
    return body(response)


def test_31_march_and_1_april_are_numbered_in_different_financial_years(client, writer, blr, patient, medicine):
    numbers = [
        create(client, writer, patient, blr, day, medicine)["invoice_number"]
        for day in ("2026-03-31", "2026-04-01", "2026-03-31", "2026-04-01", "2026-04-02")
    ]

    assert numbers == [
        "BLR/2025-26/00001",
        "BLR/2026-27/00001",
        "BLR/2025-26/00002",
        "BLR/2026-27/00002",
        "BLR/2026-27/00003",
    ]
    assert sorted(InvoiceNumberCounter.objects.values_list("financial_year", "last_number")) == [
        ("2025-26", 2),
        ("2026-27", 3),
    ]
    assert sorted(Invoice.objects.values_list("financial_year", flat=True)) == ["2025-26"] * 2 + ["2026-27"] * 3


def test_a_draft_dated_31_march_finalized_later_takes_a_number_of_that_year(client, writer, blr, patient, medicine):
    draft = create(client, writer, patient, blr, "2026-03-31", medicine, finalize=False)
    create(client, writer, patient, blr, "2026-04-01", medicine)

    response = post_json(client, writer, f"{INVOICES}/{draft['id']}/finalize", {})

    assert body(response)["invoice_number"] == "BLR/2025-26/00001"


def test_each_branch_has_its_own_series(client, token_for, blr, mum, patient, medicine):
    token = token_for(["billing:write"], branches=[blr, mum])
    mumbai_patient = PatientFactory(registration_branch=mum)

    first = create(client, token, patient, blr, "2026-11-02", medicine)
    second = create(client, token, mumbai_patient, mum, "2026-11-02", medicine)
    third = create(client, token, patient, blr, "2026-11-02", medicine)

    assert [x["invoice_number"] for x in (first, second, third)] == [
        "BLR/2026-27/00001",
        "MUM/2026-27/00001",
        "BLR/2026-27/00002",
    ]


def test_the_default_date_is_today_in_the_branchs_zone_so_its_year_too(client, writer, blr, patient, medicine):
    # 31 March 2026 18:45 UTC is already 1 April 00:15 in India: the invoice is of 1 April, FY 2026-27.
    with mock.patch("django.utils.timezone.now", return_value=datetime(2026, 3, 31, 18, 45, tzinfo=UTC)):
        data = create(client, writer, patient, blr, None, medicine)

    assert (data["date"], data["invoice_number"]) == ("2026-04-01", "BLR/2026-27/00001")


def test_just_before_midnight_in_the_branch_is_still_31_march(client, writer, blr, patient, medicine):
    with mock.patch("django.utils.timezone.now", return_value=datetime(2026, 3, 31, 18, 29, tzinfo=UTC)):
        data = create(client, writer, patient, blr, None, medicine)

    assert (data["date"], data["invoice_number"]) == ("2026-03-31", "BLR/2025-26/00001")


def test_a_rolled_back_finalization_gives_its_number_back(blr, patient, medicine):
    first, second = (make_invoice(branch=blr, patient=patient, department=medicine, finalize=False) for _ in range(2))

    def finalize_then_fail() -> None:
        with transaction.atomic():
            services.invoice_finalize(invoice=first)
            raise RuntimeError("something after numbering failed")

    with pytest.raises(RuntimeError):
        finalize_then_fail()

    assert Invoice.objects.get(pk=first.pk).invoice_number is None
    assert services.invoice_finalize(invoice=second).invoice_number == "BLR/2026-27/00001"
    assert services.invoice_finalize(invoice=first).invoice_number == "BLR/2026-27/00002"


def test_an_invoice_that_fails_validation_while_finalizing_takes_no_number(client, writer, blr, patient, medicine):
    payload = {
        "patient_id": str(patient.id),
        "branch_id": str(blr.id),
        "date": "2026-11-02",
        "line_items": [{"service_name": "X", "department": medicine.name, "rate": 10, "tax_rate": 0, "discount": 11}],
        "finalize": True,
    }

    assert post_json(client, writer, INVOICES, payload).status_code == 400
    assert create(client, writer, patient, blr, "2026-11-02", medicine)["invoice_number"] == "BLR/2026-27/00001"


def test_the_number_is_unique_per_branch_in_the_database(blr, patient, medicine):
    from django.db import IntegrityError

    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))
    other = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))

    with pytest.raises(IntegrityError, match="invoice_number_unique_per_branch"), transaction.atomic():
        Invoice.objects.filter(pk=other.pk).update(invoice_number=invoice.invoice_number)


@pytest.mark.parametrize(
    ("day", "year"),
    [
        ("2026-03-31", "2025-26"),
        ("2026-04-01", "2026-27"),
        ("2027-03-31", "2026-27"),
        ("2000-01-15", "1999-00"),
        ("2099-12-31", "2099-00"),
    ],
)
def test_the_indian_financial_year_runs_april_to_march(day, year):
    assert financial_year(date.fromisoformat(day)) == year


def test_invoice_numbers_are_zero_padded_to_five_digits():
    assert format_invoice_number("BLR", "2026-27", 42) == "BLR/2026-27/00042"
    assert format_invoice_number("MUM", "2026-27", 123456) == "MUM/2026-27/123456"
