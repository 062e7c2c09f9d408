"""POST/GET /api/v1/billing/invoices, GET/PATCH …/{id}, POST …/{id}/finalize and …/{id}/cancel."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest

from billing import services
from billing.models import Invoice, LineItem
from integrations.models import AuditLogEntry
from tests.billing.factories import (
    INVOICES,
    BillableServiceFactory,
    body,
    get,
    line,
    make_invoice,
    patch_json,
    pay,
    post_json,
    snapshot,
)
from tests.helpers import assert_problem, error_fields
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

D = Decimal
DAY = "2026-11-02"


@pytest.fixture
def physio(ortho, medicine):  # create_body bills General Medicine too
    return BillableServiceFactory(
        code="PHYSIO", name="Physiotherapy session", department=ortho, rate=D("700.00"), tax_rate=D("18.00")
    )


def create_body(patient, branch, **changes):
    data = {
        "patient_id": patient.patient_id,
        "branch_id": str(branch.id),
        "date": DAY,
        "line_items": [
            {"service_code": "PHYSIO", "quantity": D("0.5")},
            {
                "service_name": "Dressing",
                "department": "general medicine",
                "quantity": 2,
                "rate": D("125.25"),
                "discount": D("10.50"),
                "tax_rate": 12,
            },
        ],
    }
    data.update(changes)
    return data


# --- Create -----------------------------------------------------------------------------------------


def test_creating_a_draft_returns_201_with_the_exact_detail(client, writer, blr, patient, physio, medicine, ortho):
    response = post_json(client, writer, INVOICES, create_body(patient, blr))

    assert response.status_code == 201, response.content
    invoice = Invoice.objects.get()
    physio_line, dressing = invoice.line_items.order_by("position")
    assert response["Location"] == f"/api/v1/billing/invoices/{invoice.id}"
    assert body(response) == {
        "id": str(invoice.id),
        "invoice_number": None,
        "date": DAY,
        "status": "draft",
        "branch": {
            "id": str(blr.id),
            "name": "Bengaluru Central Clinic",
            "gstin": "29AABCC1234D1Z7",
            "state": "Karnataka",
        },
        "patient": {
            "id": str(patient.id),
            "patient_id": patient.patient_id,
            "name": "Priya Sharma",
        },
        "place_of_supply": "Karnataka",
        "place_of_supply_code": "29",
        "line_items": [
            {
                "id": str(physio_line.id),
                "service_name": "Physiotherapy session",
                "department": "Orthopaedics",
                "quantity": D("0.5"),
                "rate": D("700.00"),
                "discount": D("0.00"),
                "tax_rate": D("18.00"),
                "tax_category": "taxable",
                "hsn_sac": None,
                "taxable_amount": D("350.00"),
                "cgst": D("31.50"),
                "sgst": D("31.50"),
                "igst": D("0.00"),
                "amount": D("413.00"),
            },
            {
                "id": str(dressing.id),
                "service_name": "Dressing",
                "department": "General Medicine",
                "quantity": 2,
                "rate": D("125.25"),
                "discount": D("10.50"),
                "tax_rate": D("12.00"),
                "tax_category": "taxable",
                "hsn_sac": None,
                "taxable_amount": D("240.00"),
                "cgst": D("14.40"),
                "sgst": D("14.40"),
                "igst": D("0.00"),
                "amount": D("268.80"),
            },
        ],
        "totals": {
            "sub_total": D("600.50"),
            "discount": D("10.50"),
            "taxable": D("590.00"),
            "cgst": D("45.90"),
            "sgst": D("45.90"),
            "igst": D("0.00"),
            "tax": D("91.80"),
            "grand_total": D("681.80"),
        },
        # Neither line names an HSN/SAC code: one summary row per category and rate, code null.
        "hsn_summary": [
            {
                "hsn_sac": None,
                "tax_category": "taxable",
                "tax_rate": D("12.00"),
                "taxable_value": D("240.00"),
                "cgst": D("14.40"),
                "sgst": D("14.40"),
                "igst": D("0.00"),
                "total_tax": D("28.80"),
            },
            {
                "hsn_sac": None,
                "tax_category": "taxable",
                "tax_rate": D("18.00"),
                "taxable_value": D("350.00"),
                "cgst": D("31.50"),
                "sgst": D("31.50"),
                "igst": D("0.00"),
                "total_tax": D("63.00"),
            },
        ],
        "payments": [],
        "credit_notes": [],
        "refunds": [],
        "paid": D("0.00"),
        "credited": D("0.00"),
        "net_total": D("681.80"),
        "refunded": D("0.00"),
        "balance": D("681.80"),
        "refund_due": D("0.00"),
    }
    assert b'"grand_total":681.80' in response.content  # a JSON number with its two places, never a string
    assert (physio_line.service_id, dressing.service_id) == (physio.id, None)
    assert (invoice.interstate, invoice.place_of_supply, invoice.financial_year) == (False, "Karnataka", None)


def test_finalize_true_creates_the_invoice_finalized_with_the_first_number(client, writer, blr, patient, physio):
    response = post_json(client, writer, INVOICES, create_body(patient, blr, finalize=True))

    assert response.status_code == 201, response.content
    assert (body(response)["status"], body(response)["invoice_number"]) == ("finalized", "BLR/2026-27/00001")
    invoice = Invoice.objects.get()
    assert invoice.financial_year == "2026-27"
    assert invoice.finalized_at is not None


def test_a_patient_from_another_state_is_charged_igst(client, writer, blr, visitor, physio):
    response = post_json(client, writer, INVOICES, create_body(visitor, blr))

    assert response.status_code == 201, response.content
    data = body(response)
    assert [(x["cgst"], x["sgst"], x["igst"]) for x in data["line_items"]] == [
        (D("0.00"), D("0.00"), D("63.00")),
        (D("0.00"), D("0.00"), D("28.80")),
    ]
    assert data["totals"] == {
        "sub_total": D("600.50"),
        "discount": D("10.50"),
        "taxable": D("590.00"),
        "cgst": D("0.00"),
        "sgst": D("0.00"),
        "igst": D("91.80"),
        "tax": D("91.80"),
        "grand_total": D("681.80"),
    }
    invoice = Invoice.objects.get()
    assert (invoice.interstate, invoice.place_of_supply) == (True, "Maharashtra")


def test_a_patient_without_an_address_state_is_charged_cgst_and_sgst(client, writer, blr, physio):
    unknown = PatientFactory(address_state="", registration_branch=blr)

    response = post_json(client, writer, INVOICES, create_body(unknown, blr))

    assert body(response)["totals"]["cgst"] == body(response)["totals"]["sgst"] == D("45.90")
    assert Invoice.objects.get().place_of_supply == "Karnataka"


def test_the_treatment_is_fixed_at_creation_even_if_the_patient_moves(client, writer, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    patient.address_state = "Kerala"
    patient.save()

    response = patch_json(
        client,
        writer,
        f"{INVOICES}/{invoice.id}",
        {"line_items": [{"service_name": "X", "department": "General Medicine", "rate": 100, "tax_rate": 18}]},
    )

    assert response.status_code == 200, response.content
    assert body(response)["totals"]["cgst"] == D("9.00")


def test_catalogue_values_can_be_overridden_on_the_line(client, writer, blr, patient, physio, medicine):
    data = create_body(
        patient,
        blr,
        line_items=[
            {
                "service_code": "PHYSIO",
                "service_name": "Physio (home visit)",
                "rate": 900,
                "department": str(medicine.id),
            }
        ],
    )

    response = post_json(client, writer, INVOICES, data)

    assert response.status_code == 201, response.content
    (item,) = body(response)["line_items"]
    assert (item["service_name"], item["department"], item["rate"], item["tax_rate"], item["amount"]) == (
        "Physio (home visit)",
        "General Medicine",
        D("900.00"),
        D("18.00"),
        D("1062.00"),
    )


def test_the_branch_defaults_to_the_clients_only_branch_and_the_date_to_today_there(
    client, writer, blr, patient, physio
):
    data = create_body(patient, blr)
    del data["branch_id"], data["date"]

    response = post_json(client, writer, INVOICES, data)

    assert response.status_code == 201, response.content
    invoice = Invoice.objects.get()
    assert invoice.branch == blr
    from django.utils import timezone

    assert invoice.date == timezone.localtime(timezone.now(), blr.zone).date()


def test_missing_and_malformed_fields_are_all_named_and_nothing_is_created(client, writer, blr, patient, physio):
    response = post_json(
        client,
        writer,
        INVOICES,
        {
            "branch_id": "not-a-uuid",
            "date": "2026-13-01",
            "line_items": [
                {"service_code": "PHYSIO", "quantity": 0},
                {"department": "General Medicine", "rate": D("10.005"), "tax_rate": 101},
                {"service_name": "X", "discount": -1, "colour": "red"},
            ],
            "finalise": True,
        },
    )

    assert sorted(error_fields(response)) == [
        "branch_id",
        "date",
        "finalise",
        "line_items.0.quantity",
        "line_items.1.rate",
        "line_items.1.tax_rate",
        "line_items.2.colour",
        "line_items.2.discount",
        "patient_id",
    ]
    assert Invoice.objects.count() == 0


def test_an_empty_line_list_is_refused(client, writer, blr, patient):
    assert error_fields(post_json(client, writer, INVOICES, create_body(patient, blr, line_items=[]))) == ["line_items"]


def test_a_line_without_service_name_or_code_is_refused(client, writer, blr, patient):
    data = create_body(patient, blr, line_items=[{"department": "General Medicine", "rate": 10, "tax_rate": 0}])

    assert error_fields(post_json(client, writer, INVOICES, data)) == ["line_items.0.service_name"]


def test_catalogue_and_department_problems_are_named_per_line(client, writer, blr, patient, physio, medicine):
    BillableServiceFactory(code="OLD", active=False, department=medicine)
    data = create_body(
        patient,
        blr,
        line_items=[
            {"service_code": "NOPE"},
            {"service_code": "OLD"},
            {"service_name": "Free text"},
            {"service_name": "Free text", "department": "Astrology", "rate": 1, "tax_rate": 0},
            {"service_code": "PHYSIO", "discount": D("350.01"), "quantity": D("0.5")},
        ],
    )

    response = post_json(client, writer, INVOICES, data)

    assert sorted(error_fields(response)) == [
        "line_items.0.service_code",
        "line_items.1.service_code",
        "line_items.2.department",
        "line_items.2.rate",
        "line_items.2.tax_rate",
        "line_items.3.department",
        "line_items.4.discount",
    ]
    assert Invoice.objects.count() == 0


def test_bad_references_and_formats_are_named_in_one_response(client, writer, blr, mum, physio):
    data = create_body(
        PatientFactory(registration_branch=mum),
        mum,
        date="31-12-2026",
        line_items=[{"service_code": "NOPE"}, {"service_code": "PHYSIO", "discount": 1000}],
    )

    assert sorted(error_fields(post_json(client, writer, INVOICES, data))) == [
        "branch_id",
        "date",
        "line_items.0.service_code",
        "line_items.1.discount",
        "patient_id",
    ]
    assert Invoice.objects.count() == 0


def test_a_discount_above_quantity_times_rate_is_a_400_on_that_line(client, writer, blr, patient, physio):
    data = create_body(
        patient, blr, line_items=[{"service_code": "PHYSIO", "quantity": D("0.5"), "discount": D("350.01")}]
    )

    response = post_json(client, writer, INVOICES, data)

    assert error_fields(response) == ["line_items.0.discount"]
    assert response.json()["errors"][0]["message"] == "The discount 350.01 exceeds quantity x rate (350.00)."
    assert Invoice.objects.count() == LineItem.objects.count() == 0


def test_a_future_date_is_refused(client, writer, blr, patient, physio):
    response = post_json(client, writer, INVOICES, create_body(patient, blr, date="2099-01-01"))

    assert error_fields(response) == ["date"]
    assert Invoice.objects.count() == 0


def test_a_patient_or_branch_the_client_may_not_use_is_a_400(client, writer, blr, mum, physio):
    elsewhere = PatientFactory(registration_branch=mum)
    mine = PatientFactory(registration_branch=blr)

    assert error_fields(post_json(client, writer, INVOICES, create_body(elsewhere, blr))) == ["patient_id"]
    assert error_fields(post_json(client, writer, INVOICES, create_body(mine, mum))) == ["branch_id"]
    unknown = create_body(mine, blr, patient_id="PAT-999999")
    assert error_fields(post_json(client, writer, INVOICES, unknown)) == ["patient_id"]
    assert Invoice.objects.count() == 0


def test_a_client_at_several_branches_must_name_the_branch(client, token_for, blr, mum, patient, physio):
    token = token_for(["billing:write"], branches=[blr, mum])
    data = create_body(patient, blr)
    del data["branch_id"]

    assert error_fields(post_json(client, token, INVOICES, data)) == ["branch_id"]


def test_an_inactive_patient_cannot_be_invoiced(client, writer, blr, physio):
    merged = PatientFactory(registration_branch=blr, is_active=False)

    assert error_fields(post_json(client, writer, INVOICES, create_body(merged, blr))) == ["patient_id"]


# --- Edit drafts ------------------------------------------------------------------------------------


def test_patch_replaces_the_lines_and_date_of_a_draft(client, writer, blr, patient, medicine, physio):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 1))

    response = patch_json(
        client,
        writer,
        f"{INVOICES}/{invoice.id}",
        {"date": DAY, "line_items": [{"service_code": "PHYSIO", "quantity": 2, "discount": 100}]},
    )

    assert response.status_code == 200, response.content
    data = body(response)
    assert (data["date"], data["status"], len(data["line_items"])) == (DAY, "draft", 1)
    assert data["totals"]["grand_total"] == D("1534.00")  # 1400 - 100 = 1300 + 18 %
    assert Invoice.objects.get().grand_total == D("1534.00")
    assert LineItem.objects.count() == 1


def test_patch_of_a_finalized_invoice_is_409_and_changes_nothing(client, writer, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    before = snapshot(invoice)

    response = patch_json(client, writer, f"{INVOICES}/{invoice.id}", {"date": DAY})

    data = assert_problem(response, 409, "invalid_state", current_status="finalized")
    assert data["detail"] == "Cannot edit an invoice that is finalized; it must be draft."
    assert snapshot(invoice) == before


# --- Finalize and cancel ------------------------------------------------------------------------------


def test_finalize_assigns_the_next_number_and_locks_the_invoice(client, writer, blr, patient, medicine):
    make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 1))
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 2))

    response = post_json(client, writer, f"{INVOICES}/{draft.id}/finalize", {})

    assert response.status_code == 200, response.content
    assert (body(response)["status"], body(response)["invoice_number"]) == ("finalized", "BLR/2026-27/00002")
    again = post_json(client, writer, f"{INVOICES}/{draft.id}/finalize", {})
    assert_problem(again, 409, "invalid_state", current_status="finalized")
    assert Invoice.objects.get(pk=draft.pk).invoice_number == "BLR/2026-27/00002"


def test_finalize_refuses_a_body(client, writer, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)

    assert error_fields(post_json(client, writer, f"{INVOICES}/{draft.id}/finalize", {"number": 7})) == ["number"]
    assert Invoice.objects.get().status == "draft"


def test_cancelling_a_draft_leaves_it_unnumbered(client, writer, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)

    response = post_json(client, writer, f"{INVOICES}/{draft.id}/cancel", {"reason": " Duplicate entry "})

    assert response.status_code == 200, response.content
    assert (body(response)["status"], body(response)["invoice_number"]) == ("cancelled", None)
    invoice = Invoice.objects.get()
    assert (invoice.cancellation_reason, invoice.cancelled_at is not None) == ("Duplicate entry", True)


def test_a_cancelled_finalized_invoice_keeps_its_number_and_the_next_one_is_not_reused(
    client, writer, blr, patient, medicine
):
    first = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 1))

    response = post_json(client, writer, f"{INVOICES}/{first.id}/cancel", {"reason": "Wrong patient"})

    assert (body(response)["status"], body(response)["invoice_number"]) == ("cancelled", "BLR/2026-27/00001")
    second = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))
    assert second.invoice_number == "BLR/2026-27/00002"


@pytest.mark.parametrize("payload", [{}, {"reason": ""}, {"reason": "   "}])
def test_cancel_requires_a_reason(client, writer, blr, patient, medicine, payload):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    before = snapshot(invoice)

    assert error_fields(post_json(client, writer, f"{INVOICES}/{invoice.id}/cancel", payload)) == ["reason"]
    assert snapshot(invoice) == before


@pytest.mark.parametrize("state", ["partially_paid", "paid", "cancelled"])
def test_cancel_is_409_once_anything_is_paid_or_when_cancelled(client, writer, blr, patient, medicine, state):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    if state == "partially_paid":
        pay(invoice, "100.00")
    elif state == "paid":
        pay(invoice, "1180.00")
    else:
        post_json(client, writer, f"{INVOICES}/{invoice.id}/cancel", {"reason": "first"})
    before = snapshot(invoice)

    response = post_json(client, writer, f"{INVOICES}/{invoice.id}/cancel", {"reason": "Patient disputes"})

    assert_problem(response, 409, "invalid_state", current_status=state)
    assert snapshot(invoice) == before


# --- Detail ---------------------------------------------------------------------------------------


def test_the_detail_shows_payments_paid_and_balance(client, reader, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))
    payment = pay(invoice, "180.50", mode="upi", reference="UPI-1", on=date(2026, 11, 3))
    cash = pay(invoice, "99.50", on=date(2026, 11, 4))

    response = get(client, reader, f"{INVOICES}/{invoice.id}")

    assert response.status_code == 200
    data = body(response)
    assert data["payments"] == [
        {
            "id": str(payment.id),
            "amount": D("180.50"),
            "payment_mode": "upi",
            "reference": "UPI-1",
            "payment_date": "2026-11-03",
            "recorded_at": payment.recorded_at.astimezone(blr.zone).isoformat(),
        },
        {
            "id": str(cash.id),
            "amount": D("99.50"),
            "payment_mode": "cash",
            "reference": None,
            "payment_date": "2026-11-04",
            "recorded_at": cash.recorded_at.astimezone(blr.zone).isoformat(),
        },
    ]
    assert data["payments"][0]["recorded_at"].endswith("+05:30")
    assert (data["status"], data["paid"], data["balance"]) == ("partially_paid", D("280.00"), D("900.00"))


@pytest.mark.parametrize("ref", ["3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10", "not-a-uuid", "BLR-2026-27-00001"])
def test_an_unknown_invoice_is_404(client, reader, ref):
    assert_problem(get(client, reader, f"{INVOICES}/{ref}"), 404, "not_found")


def test_an_invoice_of_another_branch_is_404_for_every_operation(client, token_for, blr, mum, medicine):
    theirs = make_invoice(branch=mum, patient=PatientFactory(registration_branch=mum), department=medicine)
    draft = make_invoice(branch=mum, patient=theirs.patient, department=medicine, finalize=False)
    token = token_for(["billing:read", "billing:write"], branches=[blr])
    before = [snapshot(theirs), snapshot(draft)]

    assert_problem(get(client, token, f"{INVOICES}/{theirs.id}"), 404, "not_found")
    assert_problem(patch_json(client, token, f"{INVOICES}/{draft.id}", {"date": DAY}), 404, "not_found")
    assert_problem(post_json(client, token, f"{INVOICES}/{draft.id}/finalize", {}), 404, "not_found")
    assert_problem(post_json(client, token, f"{INVOICES}/{theirs.id}/cancel", {"reason": "x"}), 404, "not_found")
    payment = {"amount": 10, "payment_mode": "cash"}
    assert_problem(post_json(client, token, f"{INVOICES}/{theirs.id}/payments", payment), 404, "not_found")
    assert [snapshot(theirs), snapshot(draft)] == before


# --- List -----------------------------------------------------------------------------------------


def test_the_list_shows_the_specified_summary_fields_newest_first(client, reader, blr, patient, visitor, medicine):
    older = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 1))
    pay(older, "180.00")
    draft = make_invoice(branch=blr, patient=visitor, department=medicine, finalize=False, on=date(2026, 11, 2))

    response = get(client, reader, INVOICES)

    assert response.status_code == 200
    assert response["X-Total-Count"] == "2"
    assert body(response) == [
        {
            "id": str(draft.id),
            "invoice_number": None,
            "patient_name": "Rahul Patil",
            "total": D("1180.00"),
            "paid": D("0.00"),
            "balance": D("1180.00"),
            "status": "draft",
            "date": "2026-11-02",
        },
        {
            "id": str(older.id),
            "invoice_number": "BLR/2026-27/00001",
            "patient_name": "Priya Sharma",
            "total": D("1180.00"),
            "paid": D("180.00"),
            "balance": D("1000.00"),
            "status": "partially_paid",
            "date": "2026-11-01",
        },
    ]


def test_list_filters(client, reader, blr, patient, visitor, medicine):
    a = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 30))
    b = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 1))
    c = make_invoice(branch=blr, patient=visitor, department=medicine, on=date(2026, 11, 2))
    pay(c, "1180.00")

    def ids(**params):
        response = get(client, reader, INVOICES, params)
        assert response.status_code == 200, response.content
        return [item["id"] for item in response.json()]

    assert ids(patient_id=patient.patient_id) == [str(b.id), str(a.id)]
    assert ids(patient_id=str(visitor.id)) == [str(c.id)]
    assert ids(status="draft") == [str(b.id)]
    assert ids(status="paid") == [str(c.id)]
    assert ids(status="finalized") == [str(a.id)]
    assert ids(date_from="2026-11-01") == [str(c.id), str(b.id)]
    assert ids(date_to="2026-11-01") == [str(b.id), str(a.id)]
    assert ids(date_from="2026-11-01", date_to="2026-11-01") == [str(b.id)]
    assert ids(branch_id=str(blr.id)) == [str(c.id), str(b.id), str(a.id)]
    assert ids(status="cancelled") == []


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"status": "open"}, ["status"]),
        ({"date_from": "yesterday"}, ["date_from"]),
        ({"date_to": "2026-02-30"}, ["date_to"]),
        ({"date_from": "2026-11-02", "date_to": "2026-11-01"}, ["date_to"]),
        ({"branch_id": "BLR"}, ["branch_id"]),
        ({"page": 0}, ["page"]),
        ({"per_page": 101}, ["per_page"]),
        ({"patient_id": "P" * 65}, ["patient_id"]),
        (
            {"page": 0, "status": "open", "patient_id": "P" * 65, "date_to": "x"},
            ["date_to", "page", "patient_id", "status"],
        ),
    ],
)
def test_bad_list_parameters_are_400_naming_them(client, reader, params, fields):
    assert sorted(error_fields(get(client, reader, INVOICES, params))) == fields


@pytest.mark.parametrize("named", ["hidden branch", "unknown branch", "hidden patient", "unknown patient"])
def test_a_filter_naming_nothing_the_client_may_see_finds_nothing_whether_it_exists_or_not(
    client, reader, mum, medicine, named
):
    """docs/api-rules.md §5.4: a 400 for an unknown id and [] for another branch's would tell which exist."""
    hidden = PatientFactory(registration_branch=mum)
    make_invoice(branch=mum, patient=hidden, department=medicine)
    params = {
        "hidden branch": {"branch_id": str(mum.id)},
        "unknown branch": {"branch_id": "00000000-0000-4000-8000-000000000009"},
        "hidden patient": {"patient_id": hidden.patient_id},
        "unknown patient": {"patient_id": "PAT-999999"},
    }[named]

    response = get(client, reader, INVOICES, params)

    assert response.status_code == 200, response.content
    assert (response.json(), response["X-Total-Count"]) == ([], "0")


def test_a_restricted_client_lists_only_its_branches_invoices(client, token_for, blr, mum, patient, medicine):
    mine = make_invoice(branch=blr, patient=patient, department=medicine)
    make_invoice(branch=mum, patient=PatientFactory(registration_branch=mum), department=medicine)
    everything = token_for(["billing:read"])

    restricted = get(client, token_for(["billing:read"], branches=[blr]), INVOICES)

    assert [item["id"] for item in restricted.json()] == [str(mine.id)]
    assert get(client, everything, INVOICES)["X-Total-Count"] == "2"


def test_pagination_is_stable_with_an_id_tiebreak_and_links_in_headers(client, reader, blr, patient, medicine):
    invoices = [make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2)) for _ in range(5)]
    Invoice.objects.update(created_at=invoices[0].created_at)  # same date and creation time: id decides
    expected = sorted(str(invoice.id) for invoice in invoices)

    pages = [get(client, reader, INVOICES, {"per_page": 2, "page": page}) for page in (1, 2, 3, 4)]

    assert [item["id"] for response in pages for item in response.json()] == expected
    assert [response["X-Total-Count"] for response in pages] == ["5"] * 4
    assert pages[3].json() == []
    assert 'rel="next"' in pages[0]["Link"]
    assert 'rel="last"' in pages[0]["Link"]
    assert "page=3" in pages[0]["Link"]


def test_list_and_detail_record_the_patients_in_the_audit_log(client, reader, blr, patient, visitor, medicine):
    first = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 1))
    make_invoice(branch=blr, patient=visitor, department=medicine, on=date(2026, 11, 2))

    get(client, reader, INVOICES)
    get(client, reader, f"{INVOICES}/{first.id}")

    listed, detailed = AuditLogEntry.objects.order_by("id")[1:]
    assert listed.patient_ids == [visitor.id, patient.id]
    assert detailed.patient_ids == [patient.id]


# --- Query counts ------------------------------------------------------------------------------------

# Both: the token with the client's branches, then the reads, then the audit row. The list reads the page
# (patients joined) and, when the page is full, a count; the detail the invoice (branch and patient joined), its lines (departments
# joined), its payments, its credit notes and its refunds (and the credit notes' lines, when it has any).
LIST_QUERIES = 4
DETAIL_QUERIES = 7


def test_the_list_takes_3_queries_for_1_invoice_and_4_for_a_full_page_of_20(
    client, reader, blr, medicine, django_assert_num_queries
):
    make_invoice(branch=blr, patient=PatientFactory(registration_branch=blr), department=medicine)
    get(client, reader, INVOICES)
    with django_assert_num_queries(LIST_QUERIES - 1):
        assert len(get(client, reader, INVOICES).json()) == 1
    for _ in range(19):
        make_invoice(branch=blr, patient=PatientFactory(registration_branch=blr), department=medicine)

    with django_assert_num_queries(LIST_QUERIES):
        assert len(get(client, reader, INVOICES).json()) == 20


def test_the_detail_takes_4_queries_unpaid_and_8_for_30_lines_5_payments_3_credit_notes_and_2_refunds(
    client, reader, blr, patient, medicine, ortho, django_assert_num_queries
):
    small = make_invoice(branch=blr, patient=patient, department=medicine)
    big = make_invoice(
        branch=blr,
        patient=patient,
        lines=[line(medicine if n % 2 else ortho, rate=f"{100 + n}.00") for n in range(30)],
    )
    for n in range(5):
        pay(big, "10.00", mode="upi", reference=f"R{n}")
    for lines in big.line_items.order_by("position")[:3]:
        services.credit_note_issue(invoice=big, reason="x", lines=[services.CreditLineInput(line_id=lines.id)])
    for n in range(2):
        services.refund_record(invoice=big, amount=D("1.00"), payment_mode="upi", reference=f"F{n}")
    get(client, reader, f"{INVOICES}/{small.id}")

    # Nothing paid, credited or refunded: those three relations are known empty from the invoice's totals.
    with django_assert_num_queries(DETAIL_QUERIES - 3):
        assert len(get(client, reader, f"{INVOICES}/{small.id}").json()["line_items"]) == 1
    with django_assert_num_queries(DETAIL_QUERIES + 1):
        data = get(client, reader, f"{INVOICES}/{big.id}").json()
    assert (len(data["line_items"]), len(data["payments"])) == (30, 5)
    assert (len(data["credit_notes"]), len(data["refunds"])) == (3, 2)


def test_the_detail_read_is_what_prefetch_related_gives(blr, patient, medicine):
    """billing.selectors reads the detail relation by relation (skipping those the totals say are empty): the
    same representation as the ORM's select_related/prefetch_related, with payments, credit notes (and their
    lines) and refunds, and nothing more read when the representation is built."""
    from django.db.models import Prefetch
    from django.utils import timezone

    from billing import selectors
    from billing.models import CreditNote, CreditNoteLine, Payment, Refund
    from billing.representations import invoice_detail
    from tests.billing.factories import make_invoice, pay

    invoice = make_invoice(
        branch=blr, patient=patient, department=medicine, on=timezone.localdate() - timedelta(days=3)
    )
    pay(invoice, "1000.00", mode="upi", reference="UPI-1")
    pay(invoice, "180.00")
    for amount in ("100.00", "52.54"):
        services.credit_note_issue(
            invoice=Invoice.objects.get(pk=invoice.pk),
            reason="Overcharged",
            lines=[services.CreditLineInput(line_id=invoice.line_items.get().id, amount=Decimal(amount))],
        )
    services.refund_record(invoice=Invoice.objects.get(pk=invoice.pk), amount=Decimal("100.00"), payment_mode="cash")
    reference = (
        Invoice.objects.filter(id=invoice.id)
        .select_related("branch", "patient")
        .prefetch_related(
            Prefetch("line_items", queryset=LineItem.objects.select_related("department").order_by("position", "id")),
            Prefetch("payments", queryset=Payment.objects.order_by("recorded_at", "id")),
            Prefetch(
                "credit_notes",
                queryset=CreditNote.objects.order_by("created_at", "id").prefetch_related(
                    Prefetch("lines", queryset=CreditNoteLine.objects.order_by("position", "id"))
                ),
            ),
            Prefetch("refunds", queryset=Refund.objects.order_by("recorded_at", "id")),
        )
        .get()
    )
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        loaded = selectors.invoice_detail_load(invoice.id)
        shown = invoice_detail(loaded)
    assert len(queries) == 6
    assert shown == invoice_detail(reference)
    assert (len(shown["payments"]), len(shown["credit_notes"]), len(shown["refunds"])) == (2, 2, 1)
