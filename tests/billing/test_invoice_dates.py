"""Invoice dates are bounded (docs/api-rules.md §7): no earlier than 1 April of the previous Indian financial
year and never after today at the branch. Refused on create and edit through the API (400 naming `date`),
at finalization, in the services and in the admin, so a number such as `BLR/0-01/00001` is never issued."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from django.utils import timezone

from billing import services
from billing.models import Invoice, InvoiceNumberCounter, LineItem
from clinic.errors import FieldError
from tests.billing.factories import INVOICES, body, make_invoice, patch_json, post_json, snapshot
from tests.billing.test_admin import ADD, form_data
from tests.helpers import assert_problem

pytestmark = pytest.mark.django_db


def today() -> date:
    return timezone.localtime(timezone.now(), timezone.get_fixed_timezone(330)).date()  # the branches are in IST


def earliest() -> date:
    """1 April of the previous financial year (April-March)."""
    current_start = today().year if today().month >= 4 else today().year - 1
    return date(current_start - 1, 4, 1)


def financial_year(day: date) -> str:
    start = day.year if day.month >= 4 else day.year - 1
    return f"{start}-{(start + 1) % 100:02d}"


def create(patient: Any, branch: Any, day: date | str, finalize: bool = True) -> dict[str, Any]:
    """A create body with one line in General Medicine (the `medicine` fixture)."""
    line = {"service_name": "Consultation", "department": "General Medicine", "rate": 500, "tax_rate": 18}
    return {
        "patient_id": patient.patient_id,
        "branch_id": str(branch.id),
        "date": str(day),
        "line_items": [line],
        "finalize": finalize,
    }


def assert_date_refused(response: Any, message: str) -> None:
    data = assert_problem(response, 400, "validation_error")
    assert data == {
        "type": "/api/v1/problems/validation_error",
        "title": "Invalid input",
        "status": 400,
        "detail": "The request has invalid fields.",
        "code": "validation_error",
        "request_id": response["X-Request-ID"],
        "errors": [{"field": "date", "code": "invalid", "message": message}],
    }


def too_early() -> str:
    return f"Cannot be before {earliest()}, the start of the previous financial year."


def in_the_future() -> str:
    return f"Cannot be in the future (today is {today()} at this branch)."


# --- Create ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("day", "message"),
    [
        (date(1, 1, 1), too_early),
        (None, too_early),  # the day before 1 April of the previous financial year
        (None, in_the_future),  # tomorrow
    ],
    ids=["0001-01-01", "before-the-previous-financial-year", "tomorrow"],
)
def test_a_date_out_of_bounds_is_400_on_date_and_nothing_is_created(
    client, writer, blr, patient, medicine, day, message
):
    if day is None:
        day = earliest() - timedelta(days=1) if message is too_early else today() + timedelta(days=1)

    response = post_json(client, writer, INVOICES, create(patient, blr, day))

    assert_date_refused(response, message())
    assert Invoice.objects.count() == LineItem.objects.count() == InvoiceNumberCounter.objects.count() == 0


@pytest.mark.parametrize("bound", ["earliest", "today"])
def test_the_boundary_dates_are_accepted_and_numbered_in_their_financial_year(
    client, writer, blr, patient, medicine, bound
):
    day = earliest() if bound == "earliest" else today()

    response = post_json(client, writer, INVOICES, create(patient, blr, day))

    assert response.status_code == 201, response.content
    data = body(response)
    assert (data["date"], data["status"]) == (day.isoformat(), "finalized")
    assert data["invoice_number"] == f"BLR/{financial_year(day)}/00001"


# --- Edit and finalize -------------------------------------------------------------------------------------


@pytest.mark.parametrize("day", [date(1, 1, 1), "before", "tomorrow"])
def test_moving_a_draft_out_of_bounds_is_400_on_date_and_changes_nothing(client, writer, blr, patient, medicine, day):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    if day == "before":
        day, message = earliest() - timedelta(days=1), too_early()
    elif day == "tomorrow":
        day, message = today() + timedelta(days=1), in_the_future()
    else:
        message = too_early()
    before = snapshot(draft)

    response = patch_json(client, writer, f"{INVOICES}/{draft.id}", {"date": str(day)})

    assert_date_refused(response, message)
    assert snapshot(draft) == before


def test_finalizing_a_draft_whose_date_is_now_too_old_is_400_on_date_and_takes_no_number(
    client, writer, blr, patient, medicine
):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    # Setup by a direct write: a draft raised long ago (its date was in bounds then) and never finalized.
    Invoice.objects.filter(pk=draft.pk).update(date=earliest() - timedelta(days=1))
    before = snapshot(draft)

    response = post_json(client, writer, f"{INVOICES}/{draft.id}/finalize", {})

    assert_date_refused(response, too_early())
    assert snapshot(draft) == before
    assert InvoiceNumberCounter.objects.count() == 0


# --- Services and admin ------------------------------------------------------------------------------------


def test_the_service_refuses_an_out_of_bounds_date_whoever_calls_it(blr, patient, medicine):
    with pytest.raises(FieldError) as refused:
        make_invoice(branch=blr, patient=patient, department=medicine, on=date(1, 1, 1))

    assert refused.value.errors == {"date": too_early()}
    assert Invoice.objects.count() == InvoiceNumberCounter.objects.count() == 0
    assert services.earliest_invoice_date(blr) == earliest()


def test_the_admin_refuses_a_date_before_the_previous_financial_year(admin_client, blr, patient):
    data = form_data(admin_client, ADD, {"branch": blr, "patient": patient, "date": "0001-01-01"}, {})

    response = admin_client.post(ADD, data)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["date"] == [too_early()]
    assert Invoice.objects.count() == 0
