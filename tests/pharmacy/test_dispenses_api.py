"""POST/GET /api/v1/pharmacy/dispenses and returns (docs/api-rules.md §14): first expiry first out, a named
batch, expired batches never used, each 409 with its body, the controlled drug register, billing, returns
into the same batch; a refused request changes nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from billing.models import Invoice
from clinic.models import Department
from integrations.models import AuditLogEntry
from integrations.webhooks.models import WebhookEvent
from pharmacy.models import Batch, ControlledDrugEntry, Dispense, StockMovement
from pharmacy.services import DispenseItem
from tests.billing.factories import body, get, make_invoice, post_json
from tests.helpers import REQUEST_BOOKKEEPING, assert_field_errors, assert_problem, error_fields, row_counts
from tests.pharmacy.factories import (
    DISPENSES,
    DrugFactory,
    PharmacyWorld,
    expire,
    ledger_sum,
    make_pharmacy_world,
    on_hand,
    today,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(token_for) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


def _post(client, world, payload: Any, url: str = DISPENSES) -> Any:
    return post_json(client, world.writer, url, payload)


def _unchanged(before: dict[str, int]) -> None:
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def _year() -> int:
    return today().year


def test_an_otc_dispense_takes_first_expiry_first_and_answers_the_whole_dispense(client, world):
    later = world.receive(world.para, "LATE", 10, expires_in_days=300, mrp="2.50")
    sooner = world.receive(world.para, "SOON", 4, expires_in_days=40, mrp="2.00")

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 6}]})

    assert response.status_code == 201, response.content
    dispense = Dispense.objects.get()
    lines = list(dispense.lines.order_by("position"))
    assert response["Location"] == f"/api/v1/pharmacy/dispenses/{dispense.id}"
    ref = {
        "code": "PARA500",
        "name": "Paracetamol 500 mg tablet",
        "brand_name": "Crocin",
        "schedule": "OTC",
        "unit": "tablet",
    }
    assert body(response) == {
        "id": str(dispense.id),
        "dispense_id": str(dispense.id),
        "dispense_number": f"BLR-DSP-{_year()}-000001",
        "branch_id": str(world.blr.id),
        "patient": None,
        "prescription_id": None,
        "prescription_number": None,
        "invoice_id": None,
        "lines": [
            {
                "id": str(lines[0].id),
                "line_id": str(lines[0].id),
                "drug": ref,
                "batch_number": "SOON",
                "expiry_date": sooner.expiry_date.isoformat(),
                "quantity": 4,
                "returned_quantity": 0,
                "unit_price": Decimal("2.00"),
                "amount": Decimal("8.00"),
                "prescription_item_id": None,
            },
            {
                "id": str(lines[1].id),
                "line_id": str(lines[1].id),
                "drug": ref,
                "batch_number": "LATE",
                "expiry_date": later.expiry_date.isoformat(),
                "quantity": 2,
                "returned_quantity": 0,
                "unit_price": Decimal("2.50"),
                "amount": Decimal("5.00"),
                "prescription_item_id": None,
            },
        ],
        "total": Decimal("13.00"),
        "returns": [],
        "dispensed_by": f"api:{AuditLogEntry.objects.latest('id').client.name}",
        "created_at": dispense.created_at.astimezone(world.blr.zone).isoformat(),
    }
    assert (on_hand(sooner), on_hand(later)) == (0, 8)
    assert (ledger_sum(sooner), ledger_sum(later)) == (0, 8)
    assert list(StockMovement.objects.filter(kind="dispense").order_by("id").values_list("quantity", flat=True)) == [
        -4,
        -2,
    ]


def test_an_expired_batch_is_never_picked(client, world):
    expired = expire(world.receive(world.para, "OLD", 50, expires_in_days=30))
    fresh = world.receive(world.para, "NEW", 5, expires_in_days=200)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 5}]})

    assert response.status_code == 201, response.content
    assert [line["batch_number"] for line in body(response)["lines"]] == ["NEW"]
    assert (on_hand(expired), on_hand(fresh)) == (50, 0)


def test_a_batch_expiring_today_counts_as_expired(client, world):
    batch = expire(world.receive(world.para, "TODAY", 5), on=today())
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 1}]})

    assert_problem(response, 409, "insufficient_stock", drug="PARA500", available=0)
    _unchanged(before)
    assert on_hand(batch) == 5


def test_a_named_batch_is_used_even_when_another_expires_sooner(client, world):
    world.receive(world.para, "SOON", 10, expires_in_days=20)
    named = world.receive(world.para, "NAMED", 10, expires_in_days=300)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 3, "batch": "NAMED"}]})

    assert response.status_code == 201, response.content
    assert [(line["batch_number"], line["quantity"]) for line in body(response)["lines"]] == [("NAMED", 3)]
    assert on_hand(named) == 7


def test_a_named_expired_batch_is_409_batch_expired_and_changes_nothing(client, world):
    expire(world.receive(world.para, "OLD", 10))
    world.receive(world.para, "NEW", 10)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 1, "batch": "OLD"}]})

    problem = assert_problem(response, 409, "batch_expired", drug="PARA500", batch="OLD")
    assert problem["detail"] == f"The batch OLD of PARA500 expired on {today() - timedelta(days=1):%Y-%m-%d}."
    _unchanged(before)


def test_an_unknown_named_batch_is_a_400_naming_it(client, world):
    world.receive(world.para, "NEW", 10)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 1, "batch": "NOPE"}]})

    assert error_fields(response) == ["items.0.batch"]
    _unchanged(before)


def test_a_batch_of_another_branch_is_not_found_here(client, world):
    world.receive(world.para, "MUMB", 10, branch=world.mum)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 1, "batch": "MUMB"}]})

    assert error_fields(response) == ["items.0.batch"]
    _unchanged(before)


def test_more_than_on_hand_is_409_insufficient_stock_with_the_available_integer(client, world):
    a = world.receive(world.amox, "A", 3)
    b = world.receive(world.amox, "B", 4)
    prescription = world.prescribe((world.amox, 20))
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(
        client, world, {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 8}]}
    )

    problem = assert_problem(response, 409, "insufficient_stock", drug="AMOX500", available=7)
    assert problem["detail"] == "7 units of AMOX500 are on hand (expired batches apart)."
    _unchanged(before)
    assert (on_hand(a), on_hand(b)) == (3, 4)


def test_more_than_a_named_batch_holds_is_409_with_that_batchs_quantity(client, world):
    world.receive(world.para, "A", 3)
    world.receive(world.para, "B", 40)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 4, "batch": "A"}]})

    assert_problem(response, 409, "insufficient_stock", drug="PARA500", available=3)


@pytest.mark.parametrize("drug", ["AMOX500", "ALPRAZ05", "MORPH10"])
def test_schedule_h_h1_and_x_drugs_without_a_prescription_are_409_prescription_required(client, world, drug):
    for each in (world.amox, world.alpraz, world.morph):
        world.receive(each, "B", 10)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"patient_id": world.patient.patient_id, "items": [{"drug": drug, "quantity": 1}]})

    assert_problem(response, 409, "prescription_required", drug=drug)
    _unchanged(before)


def test_more_than_the_prescription_remains_is_409_exceeds_prescription(client, world):
    world.receive(world.amox, "B", 50)
    prescription = world.prescribe((world.amox, 10))
    world.dispense((world.amox, 6), prescription=prescription)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(
        client, world, {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 5}]}
    )

    problem = assert_problem(response, 409, "exceeds_prescription", drug="AMOX500", remaining=4)
    assert problem["detail"] == "The prescription allows 4 more units of AMOX500."
    _unchanged(before)


def test_a_drug_not_on_the_prescription_is_409_not_prescribed(client, world):
    world.receive(world.para, "P", 50)
    world.receive(world.amox, "B", 50)
    prescription = world.prescribe((world.amox, 10))
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(
        client,
        world,
        {
            "prescription_id": str(prescription.id),
            "items": [{"drug": "AMOX500", "quantity": 1}, {"drug": "PARA500", "quantity": 1}],
        },
    )

    assert_problem(response, 409, "not_prescribed", drug="PARA500")
    _unchanged(before)


def test_dispensing_a_whole_prescription_completes_it_and_updates_its_items(client, world):
    world.receive(world.amox, "B", 50)
    prescription = world.prescribe((world.amox, 10))

    first = _post(
        client, world, {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 4}]}
    )
    second = _post(
        client, world, {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 6}]}
    )

    assert (first.status_code, second.status_code) == (201, 201)
    assert body(second)["patient"] == {
        "id": str(world.patient.id),
        "patient_id": world.patient.patient_id,
        "name": world.patient.name,
    }
    assert body(second)["prescription_number"] == prescription.prescription_number
    prescription.refresh_from_db()
    item = prescription.items.get()
    assert (prescription.status, item.dispensed_quantity) == ("completed", 10)
    third = _post(
        client, world, {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 1}]}
    )
    assert_problem(third, 409, "invalid_state", current_status="completed")


def test_a_cancelled_prescription_is_not_dispensed(client, world):
    world.receive(world.amox, "B", 50)
    prescription = world.prescribe((world.amox, 10))
    post_json(client, world.writer, f"/api/v1/pharmacy/prescriptions/{prescription.id}/cancel", {"reason": "Wrong"})

    response = _post(
        client, world, {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 1}]}
    )

    assert_problem(response, 409, "invalid_state", current_status="cancelled")


def test_h1_and_x_dispenses_are_written_to_the_register(client, world):
    alpraz = world.receive(world.alpraz, "AL1", 30)
    world.receive(world.morph, "MO1", 5)
    world.receive(world.amox, "AM1", 5)
    prescription = world.prescribe((world.alpraz, 10), (world.morph, 2), (world.amox, 5))

    response = _post(
        client,
        world,
        {
            "prescription_id": str(prescription.id),
            "items": [
                {"drug": "ALPRAZ05", "quantity": 10},
                {"drug": "MORPH10", "quantity": 2},
                {"drug": "AMOX500", "quantity": 5},
            ],
        },
    )

    assert response.status_code == 201, response.content
    dispense = Dispense.objects.get()
    rows = list(
        ControlledDrugEntry.objects.order_by("id").values_list(
            "date",
            "dispense_number",
            "patient_id",
            "prescriber_id",
            "prescription_number",
            "drug__code",
            "schedule",
            "batch_id",
            "quantity",
        )
    )
    assert rows == [
        (
            today(),
            dispense.dispense_number,
            world.patient.id,
            world.doctor.id,
            prescription.prescription_number,
            "ALPRAZ05",
            "H1",
            alpraz.id,
            10,
        ),
        (
            today(),
            dispense.dispense_number,
            world.patient.id,
            world.doctor.id,
            prescription.prescription_number,
            "MORPH10",
            "X",
            Batch.objects.get(batch_number="MO1").id,
            2,
        ),
    ]


def test_bill_true_adds_one_line_per_drug_with_hsn_and_gst_to_a_new_draft(client, world):
    world.receive(world.amox, "B", 50, mrp="8.50")
    world.receive(world.para, "P", 50, mrp="2.00")
    prescription = world.prescribe((world.amox, 15))

    amox = _post(
        client,
        world,
        {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 15}], "bill": True},
    )
    para = _post(
        client,
        world,
        {"patient_id": str(world.patient.id), "items": [{"drug": "PARA500", "quantity": 10}], "bill": True},
    )

    assert (amox.status_code, para.status_code) == (201, 201), (amox.content, para.content)
    invoice = Invoice.objects.get()
    assert body(amox)["invoice_id"] == body(para)["invoice_id"] == str(invoice.id)
    assert invoice.status == "draft"
    lines = list(
        invoice.line_items.order_by("position").values_list(
            "service_name",
            "department__name",
            "quantity",
            "rate",
            "hsn_sac",
            "tax_rate",
            "tax_category",
            "taxable_amount",
            "cgst",
            "sgst",
            "igst",
            "amount",
        )
    )
    # The MRP includes GST: 15 x 8.50 = 127.50 and 10 x 2.00 = 20.00 are what the lines add up to.
    assert lines == [
        (
            "Amoxicillin 500 mg capsule (AMOX500)",
            "Pharmacy",
            Decimal("15.000"),
            Decimal("7.59"),
            "30041010",
            Decimal("12.00"),
            "taxable",
            Decimal("113.84"),
            Decimal("6.83"),
            Decimal("6.83"),
            Decimal("0.00"),
            Decimal("127.50"),
        ),
        (
            "Paracetamol 500 mg tablet (PARA500)",
            "Pharmacy",
            Decimal("10.000"),
            Decimal("1.79"),
            "30049099",
            Decimal("12.00"),
            "taxable",
            Decimal("17.86"),
            Decimal("1.07"),
            Decimal("1.07"),
            Decimal("0.00"),
            Decimal("20.00"),
        ),
    ]
    assert list(invoice.line_items.order_by("position").values_list("discount", flat=True)) == [
        Decimal("0.01"),
        Decimal("0.04"),
    ]
    assert invoice.grand_total == Decimal("147.50")


def test_bill_true_lands_on_the_patients_open_draft(client, world):
    draft = make_invoice(branch=world.blr, patient=world.patient, department=world.department, finalize=False)
    world.receive(world.para, "P", 50)

    response = _post(
        client,
        world,
        {"patient_id": world.patient.patient_id, "items": [{"drug": "PARA500", "quantity": 2}], "bill": True},
    )

    assert response.status_code == 201, response.content
    assert body(response)["invoice_id"] == str(draft.id)
    assert Invoice.objects.count() == 1
    assert draft.line_items.count() == 2


def test_billing_reuses_a_pharmacy_department_of_any_case_and_never_adds_a_second(client, world):
    existing = Department.objects.create(name="PHARMACY")
    world.receive(world.para, "P", 50)

    responses = [
        _post(
            client,
            world,
            {"patient_id": world.patient.patient_id, "items": [{"drug": "PARA500", "quantity": 1}], "bill": True},
        )
        for _ in range(2)
    ]

    assert [response.status_code for response in responses] == [201, 201]
    assert list(Department.objects.filter(name__iexact="pharmacy").values_list("id", flat=True)) == [existing.id]
    assert set(Invoice.objects.get().line_items.values_list("department_id", flat=True)) == {existing.id}


def test_bill_without_a_patient_is_a_400_naming_patient_id(client, world):
    world.receive(world.para, "P", 50)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 2}], "bill": True})

    assert_field_errors(
        response, [{"field": "patient_id", "code": "invalid", "message": "Required to bill the dispense."}]
    )
    _unchanged(before)


@pytest.mark.parametrize(
    ("quantity", "code"),
    [
        (0, "min_value"),
        (-1, "min_value"),
        (1.5, "invalid"),
        ("1e9", "invalid"),
        ("10", "invalid"),
        (True, "invalid"),
        (None, "null"),
        (100_001, "max_value"),
    ],
)
def test_a_quantity_that_is_not_a_whole_positive_number_is_a_400_naming_it(client, world, quantity, code):
    world.receive(world.para, "P", 50)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"items": [{"drug": "PARA500", "quantity": quantity}]})

    assert [(e["field"], e["code"]) for e in assert_problem(response, 400, "validation_error")["errors"]] == [
        ("items.0.quantity", code)
    ]
    _unchanged(before)


def test_non_ascii_digits_and_nul_bytes_are_400s_never_500s(client, world):
    world.receive(world.para, "P", 50)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    arabic = _post(client, world, {"items": [{"drug": "PARA500", "quantity": "\u0661\u0660"}]})
    nul = _post(client, world, {"items": [{"drug": "PARA\u0000500", "quantity": 1}]})
    unknown = _post(client, world, {"items": [{"drug": "NOPE", "quantity": 1}], "extra": 1})

    assert arabic.status_code == nul.status_code == unknown.status_code == 400
    assert error_fields(unknown) == ["items.0.drug", "extra"] or error_fields(unknown) == ["extra", "items.0.drug"]
    _unchanged(before)


def test_a_prescription_of_another_branch_is_a_400_naming_it(client, world):
    world.receive(world.amox, "M", 10, branch=world.mum)
    other = world.prescribe((world.amox, 5), branch=world.mum, doctor=world.mum_doctor)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = _post(client, world, {"prescription_id": str(other.id), "items": [{"drug": "AMOX500", "quantity": 1}]})

    assert error_fields(response) == ["prescription_id"]
    _unchanged(before)


def test_the_detail_of_another_branchs_dispense_is_404(client, world):
    world.receive(world.para, "M", 10, branch=world.mum)
    other = world.dispense((world.para, 1), branch=world.mum)

    response = get(client, world.reader, f"{DISPENSES}/{other.id}")

    assert_problem(response, 404, "not_found")


def test_a_return_puts_units_back_into_the_same_batch_and_is_bounded(client, world):
    soon = world.receive(world.amox, "SOON", 3, expires_in_days=30)
    late = world.receive(world.amox, "LATE", 10, expires_in_days=300)
    prescription = world.prescribe((world.amox, 10))
    dispense = world.dispense((world.amox, 8), prescription=prescription)
    soon_line, late_line = dispense.lines.order_by("position")
    url = f"{DISPENSES}/{dispense.id}/returns"

    response = _post(
        client, world, {"reason": "Course changed", "lines": [{"line_id": str(late_line.id), "quantity": 2}]}, url
    )

    assert response.status_code == 201, response.content
    shown = body(response)
    assert [(line["batch_number"], line["returned_quantity"]) for line in shown["lines"]] == [("SOON", 0), ("LATE", 2)]
    (back,) = shown["returns"]
    assert (back["reason"], back["lines"]) == ("Course changed", [{"line_id": str(late_line.id), "quantity": 2}])
    assert (on_hand(soon), on_hand(late)) == (0, 7)
    assert ledger_sum(late) == 7
    prescription.refresh_from_db()
    assert prescription.items.get().dispensed_quantity == 6

    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    too_many = _post(client, world, {"reason": "Again", "lines": [{"line_id": str(late_line.id), "quantity": 4}]}, url)
    assert_problem(too_many, 409, "exceeds_dispensed", line_id=str(late_line.id), returnable=3)
    foreign = _post(client, world, {"reason": "x", "lines": [{"line_id": str(prescription.id), "quantity": 1}]}, url)
    assert error_fields(foreign) == ["lines.0.line_id"]
    no_reason = _post(client, world, {"reason": " ", "lines": [{"line_id": str(soon_line.id), "quantity": 1}]}, url)
    assert error_fields(no_reason) == ["reason"]
    _unchanged(before)
    assert on_hand(late) == 7


def test_a_return_of_a_completed_prescription_makes_it_active_again(client, world):
    world.receive(world.amox, "B", 10)
    prescription = world.prescribe((world.amox, 5))
    dispense = world.dispense((world.amox, 5), prescription=prescription)
    prescription.refresh_from_db()
    assert prescription.status == "completed"

    response = _post(
        client,
        world,
        {"reason": "Spare", "lines": [{"line_id": str(dispense.lines.get().id), "quantity": 1}]},
        f"{DISPENSES}/{dispense.id}/returns",
    )

    assert response.status_code == 201, response.content
    prescription.refresh_from_db()
    assert (prescription.status, prescription.items.get().dispensed_quantity) == ("active", 4)


def test_the_list_filters_by_patient_and_prescription_and_audits_the_patients(client, world):
    world.receive(world.amox, "B", 50)
    world.receive(world.para, "P", 50)
    prescription = world.prescribe((world.amox, 10))
    with_rx = world.dispense((world.amox, 2), prescription=prescription)
    world.dispense((world.para, 1))

    everything = get(client, world.reader, DISPENSES)
    by_rx = get(client, world.reader, DISPENSES, {"prescription_id": str(prescription.id)})

    assert everything["X-Total-Count"] == "2"
    assert [d["dispense_id"] for d in body(by_rx)] == [str(with_rx.id)]
    row = AuditLogEntry.objects.get(request_id=by_rx["X-Request-ID"])
    assert [str(p) for p in row.patient_ids] == [str(world.patient.id)]


@pytest.mark.parametrize(("drugs", "batches"), [(1, 1), (1, 3), (3, 1), (3, 2)])
def test_the_dispense_query_count_does_not_grow_with_its_items_or_lines(
    client, world, django_assert_num_queries, drugs, batches
):
    codes = []
    for d in range(drugs):
        drug = world.para if d == 0 else DrugFactory(code=f"OTC{d}")
        codes.append(drug.code)
        for n in range(batches):
            world.receive(drug, f"P{n}", 5 if batches == 1 else 2, expires_in_days=100 + n)
        world.receive(drug, "EMPTY", 1, expires_in_days=300)
        # An emptied batch, which the dispense neither reads nor locks.
        world.dispense(items=[DispenseItem(drug=drug, quantity=1, batch_number="EMPTY")])
        world.reorder(drug, 1)

    # Request bookkeeping (token, audit), the drugs (one query), the branch (2), then the stock locks, the
    # batches, the number, the dispense, its lines, their movements (one statement each; nothing is read
    # back for the event or the response), the webhook subscriptions and the event, the reorder levels.
    quantity = 3 if batches == 1 else 2 * batches - 1  # from every batch, one unit left: above the level
    with django_assert_num_queries(15):
        response = _post(client, world, {"items": [{"drug": code, "quantity": quantity} for code in codes]})

    assert response.status_code == 201, response.content
    assert len(body(response)["lines"]) == drugs * batches


def test_the_list_query_count_is_pinned(client, world, django_assert_num_queries):
    world.receive(world.para, "P", 50)
    for _ in range(3):
        world.dispense((world.para, 1))

    # The token with the client's branches, the page (short: no COUNT), its lines, the audit row.
    with django_assert_num_queries(5):
        response = get(client, world.reader, DISPENSES)

    assert response.status_code == 200
    assert len(body(response)) == 3


def test_an_idempotency_key_replays_the_dispense_instead_of_dispensing_twice(client, world):
    batch = world.receive(world.para, "P", 10)
    payload = {"items": [{"drug": "PARA500", "quantity": 3}]}

    first = post_json(client, world.writer, DISPENSES, payload, key="dsp-1")
    again = post_json(client, world.writer, DISPENSES, payload, key="dsp-1")
    other = post_json(client, world.writer, DISPENSES, {"items": [{"drug": "PARA500", "quantity": 4}]}, key="dsp-1")

    assert (first.status_code, again.status_code) == (201, 201)
    assert again["Idempotent-Replayed"] == "true"
    assert body(again) == body(first)
    assert_problem(other, 422, "idempotency_key_reused")
    assert Dispense.objects.count() == 1
    assert on_hand(batch) == 7


def test_drug_codes_are_read_in_one_query_trimmed_and_an_unknown_one_is_named(client, world):
    world.receive(world.para, "P", 10)

    trimmed = _post(client, world, {"items": [{"drug": " PARA500 ", "quantity": 1}]})
    unknown = _post(client, world, {"items": [{"drug": "PARA500", "quantity": 1}, {"drug": "NOPE1", "quantity": 1}]})

    assert trimmed.status_code == 201, trimmed.content
    assert [line["drug"]["code"] for line in body(trimmed)["lines"]] == ["PARA500"]
    assert unknown.status_code == 400
    assert error_fields(unknown) == ["items.1.drug"]
    assert on_hand(Batch.objects.get(batch_number="P")) == 9


@pytest.mark.parametrize("against", ["prescription", "counter"])
def test_the_created_dispense_and_its_event_are_what_a_read_returns(client, world, against):
    # The service shows the dispense as it wrote it (nothing is read back): it must be the stored one.
    world.receive(world.amox, "A1", 4, expires_in_days=40)
    world.receive(world.amox, "A2", 20, expires_in_days=400)
    world.receive(world.para, "P1", 20)
    if against == "prescription":
        prescription = world.prescribe((world.amox, 10))
        payload = {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 6}], "bill": True}
    else:
        payload = {"patient_id": str(world.patient.id), "items": [{"drug": "PARA500", "quantity": 3}], "bill": True}

    created = _post(client, world, payload)

    assert created.status_code == 201, created.content
    read = get(client, world.reader, f"{DISPENSES}/{body(created)['dispense_id']}")
    assert read.status_code == 200
    assert created.content == read.content
    event = WebhookEvent.objects.get(type="dispense.completed")
    assert event.payload["dispense"] == json.loads(read.content)
