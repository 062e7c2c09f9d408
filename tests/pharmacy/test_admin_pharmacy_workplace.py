"""The pharmacist's workplace in the admin: receiving stock, dispensing a prescription with first-expiry-
first-out suggestions, returns, the below-reorder list and the dashboard's selectors, and the H1/X register
with its balance. Every write goes through the API's services; a refused request changes nothing; another
branch's pharmacist gets 404 (or an empty list) and a receptionist 403."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from billing.models import Invoice
from clinic.staff import staff_reader
from integrations.models import AuditLogEntry
from pharmacy import selectors, services
from pharmacy.models import (
    Batch,
    ControlledDrugEntry,
    Dispense,
    DispenseLine,
    DispenseReturn,
    PrescriptionItem,
    StockMovement,
)
from tests.factories import staff_of
from tests.pharmacy.factories import PharmacyWorld, expire, make_pharmacy_world, on_hand, today

pytestmark = pytest.mark.django_db

RECEIVE = "/admin/pharmacy/batch/receive/"


@pytest.fixture
def world(token_for: Any) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


def _member(django_user_model: Any, name: str, role: str, *branches: Any) -> Any:
    user = django_user_model.objects.create_user(name, f"{name}@clinic.invalid", "pw", is_staff=True)
    staff_of(user, *branches)
    user.groups.add(Group.objects.get(name=role))
    return user


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def pharmacist(world: PharmacyWorld, django_user_model: Any) -> Any:
    return _member(django_user_model, "pharm", "pharmacist", world.blr)


@pytest.fixture
def blr(pharmacist: Any) -> Client:
    return _client(pharmacist)


@pytest.fixture
def mum(world: PharmacyWorld, django_user_model: Any) -> Client:
    return _client(_member(django_user_model, "mumpharm", "pharmacist", world.mum))


@pytest.fixture
def receptionist(world: PharmacyWorld, django_user_model: Any) -> Client:
    return _client(_member(django_user_model, "desk", "receptionist", world.blr))


def _messages(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _state() -> tuple[Any, ...]:
    """Everything a pharmacy write could change."""
    return (
        sorted(Batch.objects.values_list("batch_number", "branch__code", "quantity_on_hand")),
        StockMovement.objects.count(),
        Dispense.objects.count(),
        sorted(DispenseLine.objects.values_list("quantity", "returned_quantity")),
        DispenseReturn.objects.count(),
        sorted(PrescriptionItem.objects.values_list("quantity", "dispensed_quantity")),
        ControlledDrugEntry.objects.count(),
    )


def _receipt(world: PharmacyWorld, **changes: Any) -> dict[str, Any]:
    return {
        "branch": world.blr.pk,
        "drug": world.para.pk,
        "batch_number": "RC-1",
        "expiry_date": (today() + timedelta(days=200)).isoformat(),
        "quantity": "50",
        "unit_cost": "1.25",
        "mrp": "2.50",
        **changes,
    }


# --- Receive stock


def test_receive_stock_offers_only_the_staff_members_branches_and_writes_a_receipt(world, blr, pharmacist):
    page = blr.get(RECEIVE)

    assert page.status_code == 200
    assert [str(branch) for branch in page.context["form"].fields["branch"].queryset] == [str(world.blr)]
    assert 'href="/admin/pharmacy/batch/receive/"' in blr.get("/admin/pharmacy/batch/").content.decode()

    response = blr.post(RECEIVE, _receipt(world), follow=True)

    batch = Batch.objects.get()
    assert response.redirect_chain == [(f"/admin/pharmacy/batch/{batch.pk}/change/", 302)]
    assert (batch.branch, batch.drug, batch.batch_number, batch.quantity_on_hand) == (world.blr, world.para, "RC-1", 50)
    assert (batch.expiry_date, batch.unit_cost, batch.mrp) == (
        today() + timedelta(days=200),
        Decimal("1.25"),
        Decimal("2.50"),
    )
    movement = StockMovement.objects.get()
    assert (movement.kind, movement.quantity, movement.actor) == ("receipt", 50, "staff:pharm")
    assert _messages(response) == ["Received 50 units of PARA500 batch RC-1 at BLR: 50 on hand."]


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"expiry_date": "2020-01-01"},
            "expiry_date",
            "Must be after today at the branch: expired stock is not received.",
        ),
        ({"quantity": "0"}, "quantity", "Ensure this value is greater than or equal to 1."),
        ({"quantity": "ten"}, "quantity", "Enter a whole number."),
        ({"mrp": "-1"}, "mrp", "Ensure this value is greater than or equal to 0."),
        ({"batch_number": "   "}, "batch_number", "This field is required."),
    ],
)
def test_bad_receipts_are_form_errors_on_the_field_and_save_nothing(world, blr, changes, field, message):
    before = _state()

    response = blr.post(RECEIVE, _receipt(world, **changes))

    assert response.status_code == 200
    assert response.context["form"].errors == {field: [message]}
    assert _state() == before


def test_a_known_batch_keeps_its_mrp_and_expiry_as_the_service_says(world, blr):
    batch = world.receive(world.para, "RC-1", 10, expires_in_days=200, mrp="2.50")
    before = _state()

    response = blr.post(RECEIVE, _receipt(world, mrp="3.00"))

    assert response.context["form"].errors == {"mrp": ["The batch RC-1 has the MRP 2.50."]}
    assert (_state(), on_hand(batch)) == (before, 10)


def test_another_branch_cannot_be_picked_for_a_receipt(world, blr):
    response = blr.post(RECEIVE, _receipt(world, branch=world.mum.pk))

    assert response.context["form"].errors == {
        "branch": ["Select a valid choice. That choice is not one of the available choices."]
    }
    assert not Batch.objects.exists()


# --- Dispense with FEFO suggestions


def _dispense_url(prescription: Any) -> str:
    return f"/admin/pharmacy/prescription/{prescription.pk}/dispense/"


def test_the_dispense_page_suggests_the_batches_expiring_first_and_never_an_expired_one(world, blr, pharmacist):
    late = world.receive(world.para, "LATE", 50, expires_in_days=300)
    early = world.receive(world.para, "EARLY", 8, expires_in_days=40)
    expire(world.receive(world.para, "GONE", 99, expires_in_days=5))
    prescription = world.prescribe((world.para, 12))

    page = blr.get(_dispense_url(prescription))

    assert page.status_code == 200
    ((suggestion, form),) = page.context["page"].rows
    assert [(batch.batch_number, units) for batch, units in suggestion.draws] == [("EARLY", 8), ("LATE", 4)]
    assert form["quantity"].value() == 12
    html = page.content.decode()
    assert "8 from batch EARLY" in html
    assert "4 from batch LATE" in html
    assert "GONE" not in html
    assert (
        f'href="{_dispense_url(prescription)}"'
        in blr.get(f"/admin/pharmacy/prescription/{prescription.pk}/change/").content.decode()
    )
    assert selectors.dispense_suggestions(prescription=prescription)[0].quantity == 12

    response = blr.post(_dispense_url(prescription), {"item-0-quantity": "12"}, follow=True)

    dispense = Dispense.objects.get()
    assert response.redirect_chain == [(f"/admin/pharmacy/dispense/{dispense.pk}/change/", 302)]
    lines = list(dispense.lines.order_by("position").values_list("batch__batch_number", "quantity"))
    assert lines == [("EARLY", 8), ("LATE", 4)]
    assert (on_hand(early), on_hand(late), dispense.dispensed_by) == (0, 46, "staff:pharm")
    prescription.refresh_from_db()
    assert (prescription.status, prescription.items.get().dispensed_quantity) == ("completed", 12)
    assert _messages(response) == [
        f"Dispensed {dispense.dispense_number}: 8 PARA500 from batch EARLY, 4 PARA500 from batch LATE."
    ]
    audit = AuditLogEntry.objects.filter(path=_dispense_url(prescription)).order_by("id")
    assert [(row.actor, row.patient_ids) for row in audit] == [("staff:pharm", [world.patient.id])] * 2


def test_a_schedule_x_dispense_goes_into_the_register_with_its_balance(world, blr):
    world.receive(world.morph, "MO1", 10)
    prescription = world.prescribe((world.morph, 3))

    blr.post(_dispense_url(prescription), {"item-0-quantity": "3"})

    entry = ControlledDrugEntry.objects.get()
    assert (entry.drug, entry.quantity, entry.batch.batch_number, entry.prescriber) == (
        world.morph,
        3,
        "MO1",
        world.doctor,
    )
    page = blr.get("/admin/pharmacy/controlleddrugentry/")
    (row,) = page.context["cl"].result_list
    admin = page.context["cl"].model_admin
    local = timezone.localtime(entry.dispense.created_at, world.blr.zone)
    assert (row.date, admin.time(row), admin.balance(row)) == (local.date(), f"{local:%H:%M}", 7)


def test_ticking_the_invoice_box_bills_the_dispense_as_the_api_does(world, blr):
    world.receive(world.amox, "B", 50, mrp="8.50")
    prescription = world.prescribe((world.amox, 15))

    blr.post(_dispense_url(prescription), {"item-0-quantity": "15", "bill": "on"})

    dispense = Dispense.objects.get()
    invoice = Invoice.objects.get()
    assert (dispense.invoice, invoice.status, invoice.patient) == (invoice, "draft", world.patient)
    line = invoice.line_items.get()
    assert (line.service_name, line.quantity, line.hsn_sac, line.amount) == (
        "Amoxicillin 500 mg capsule (AMOX500)",
        Decimal("15.000"),
        "30041010",
        Decimal("127.50"),
    )


def test_a_staff_member_without_a_branch_receives_nothing(world, django_user_model):
    nowhere = _client(_member(django_user_model, "nobody", "pharmacist"))

    page = nowhere.get(RECEIVE)
    refused = nowhere.post(RECEIVE, _receipt(world))

    assert list(page.context["form"].fields["branch"].queryset) == []
    assert refused.context["form"].errors == {
        "branch": ["Select a valid choice. That choice is not one of the available choices."]
    }
    assert not Batch.objects.exists()


def test_dispensing_more_than_remains_is_an_error_on_the_item_and_changes_nothing(world, blr):
    world.receive(world.para, "P1", 50)
    prescription = world.prescribe((world.para, 5), (world.amox, 2))
    world.receive(world.amox, "A1", 5)
    before = _state()

    response = blr.post(_dispense_url(prescription), {"item-0-quantity": "6", "item-1-quantity": "2"})

    assert response.status_code == 200
    assert response.context["page"].options.non_field_errors() == ["The prescription allows 5 more units of PARA500."]
    assert _state() == before


def test_stock_gone_since_the_page_was_shown_is_a_clear_message_and_changes_nothing(world, blr):
    batch = world.receive(world.para, "P1", 5)
    prescription = world.prescribe((world.para, 5))
    assert blr.get(_dispense_url(prescription)).context["page"].rows[0][1]["quantity"].value() == 5
    services.stock_adjust(branch=world.blr, drug=world.para, batch_number="P1", quantity=-3, reason="Broken", actor="t")
    before = _state()

    response = blr.post(_dispense_url(prescription), {"item-0-quantity": "5"})

    assert response.status_code == 200
    assert "2 units of PARA500 are on hand (expired batches apart)." in response.content.decode()
    assert (_state(), on_hand(batch)) == (before, 2)


def test_a_bad_quantity_or_nothing_to_dispense_is_a_form_error(world, blr):
    world.receive(world.para, "P1", 5)
    prescription = world.prescribe((world.para, 5))
    before = _state()

    typed = blr.post(_dispense_url(prescription), {"item-0-quantity": "two"})
    nothing = blr.post(_dispense_url(prescription), {"item-0-quantity": "0"})

    assert typed.context["page"].rows[0][1].errors == {"quantity": ["Enter a whole number."]}
    assert nothing.context["page"].options.non_field_errors() == ["Dispense at least one drug."]
    assert _state() == before


def test_a_cancelled_prescription_is_refused_with_its_status(world, blr):
    world.receive(world.para, "P1", 5)
    prescription = world.prescribe((world.para, 5))
    services.prescription_cancel(prescription=prescription, reason="Duplicate")
    before = _state()

    response = blr.post(_dispense_url(prescription), {"item-0-quantity": "5"})

    assert response.context["page"].options.non_field_errors() == [
        "The prescription is cancelled: nothing more is dispensed against it."
    ]
    assert _state() == before


# --- Returns


def _return_url(dispense: Any) -> str:
    return f"/admin/pharmacy/dispense/{dispense.pk}/return/"


def test_returning_a_line_puts_units_back_in_its_batch(world, blr):
    batch = world.receive(world.para, "P1", 10)
    prescription = world.prescribe((world.para, 6))
    dispense = world.dispense((world.para, 6), prescription=prescription)
    assert (
        f'href="{_return_url(dispense)}"' in blr.get(f"/admin/pharmacy/dispense/{dispense.pk}/change/").content.decode()
    )

    response = blr.post(_return_url(dispense), {"line-0-quantity": "2", "reason": "Patient stopped"}, follow=True)

    assert response.redirect_chain == [(f"/admin/pharmacy/dispense/{dispense.pk}/change/", 302)]
    assert _messages(response) == ["2 units returned to stock."]
    assert on_hand(batch) == 6
    back = DispenseReturn.objects.get()
    assert (back.reason, back.returned_by, back.lines.get().quantity) == ("Patient stopped", "staff:pharm", 2)
    assert DispenseLine.objects.get().returned_quantity == 2
    prescription.refresh_from_db()
    assert (prescription.status, prescription.items.get().dispensed_quantity) == ("active", 4)


def test_returning_more_than_dispensed_or_without_a_reason_changes_nothing(world, blr):
    world.receive(world.para, "P1", 10)
    dispense = world.dispense((world.para, 3))
    before = _state()

    too_many = blr.post(_return_url(dispense), {"line-0-quantity": "4", "reason": "Extra"})
    no_reason = blr.post(_return_url(dispense), {"line-0-quantity": "1", "reason": ""})
    nothing = blr.post(_return_url(dispense), {"line-0-quantity": "0", "reason": "None"})

    assert too_many.context["page"].rows[0][1].errors == {"quantity": ["3 units of this line may still come back."]}
    assert no_reason.context["page"].reason.errors == {"reason": ["This field is required."]}
    assert nothing.context["page"].reason.non_field_errors() == ["Return at least one line."]
    assert _state() == before


# --- Below reorder and expiring: the lists and the dashboard's selectors


def test_the_below_reorder_list_and_selector_show_the_staff_members_low_drugs(world, blr, pharmacist):
    world.receive(world.para, "P1", 5)
    expire(world.receive(world.para, "OLD", 100))  # expired stock does not count
    world.receive(world.amox, "A1", 20)
    world.reorder(world.para, 10)
    world.reorder(world.amox, 10)
    world.reorder(world.alpraz, 3)  # none at all
    world.reorder(world.para, 10, branch=world.mum)  # another branch's

    url = selectors.below_reorder_url()
    page = blr.get(url)

    assert url == "/admin/pharmacy/reorderlevel/?stock=below"
    assert page.status_code == 200
    admin = page.context["cl"].model_admin
    shown = [
        (r.drug.code, r.branch.code, r.level, admin.on_hand(r), admin.stock_status(r))
        for r in page.context["cl"].result_list
    ]
    assert shown == [("ALPRAZ05", "BLR", 3, 0, "BELOW reorder level"), ("PARA500", "BLR", 10, 5, "BELOW reorder level")]
    low = selectors.below_reorder(client=staff_reader(pharmacist))
    assert [(r.drug.code, r.branch.code, r.on_hand) for r in low] == [("ALPRAZ05", "BLR", 0), ("PARA500", "BLR", 5)]
    api, total = selectors.stock_level_page(client=staff_reader(pharmacist), offset=0, limit=50, below_reorder=True)
    assert (total, [entry.drug.code for entry in api]) == (2, ["ALPRAZ05", "PARA500"])  # the API's stock list agrees
    enough = blr.get("/admin/pharmacy/reorderlevel/?stock=enough").context["cl"].result_list
    assert [r.drug.code for r in enough] == ["AMOX500"]


def test_the_expiring_selector_and_its_link_list_the_same_batches(world, blr, pharmacist):
    world.receive(world.para, "SOON", 5, expires_in_days=20)
    emptied = world.receive(world.amox, "EMPTY", 1, expires_in_days=10)
    services.stock_adjust(branch=world.blr, drug=world.amox, batch_number="EMPTY", quantity=-1, reason="x", actor="t")
    world.receive(world.para, "LATER", 5, expires_in_days=200)
    world.receive(world.para, "MUMSOON", 5, expires_in_days=20, branch=world.mum)

    soon = selectors.expiring_soon(client=staff_reader(pharmacist))
    listed = blr.get(selectors.expiring_soon_url()).context["cl"].result_list

    assert on_hand(emptied) == 0
    assert [batch.batch_number for batch in soon] == ["SOON"]
    assert [batch.batch_number for batch in listed] == ["SOON"]


# --- Other branches and other roles


def test_another_branchs_pharmacist_gets_404_and_changes_nothing(world, mum):
    world.receive(world.para, "P1", 10)
    prescription = world.prescribe((world.para, 4))
    dispense = world.dispense((world.para, 2), prescription=prescription)
    world.reorder(world.para, 100)
    before = _state()

    answers = [
        mum.get(_dispense_url(prescription)).status_code,
        mum.post(_dispense_url(prescription), {"item-0-quantity": "2"}).status_code,
        mum.get(_return_url(dispense)).status_code,
        mum.post(_return_url(dispense), {"line-0-quantity": "1", "reason": "x"}).status_code,
    ]

    assert answers == [404] * 4
    assert _state() == before
    assert list(mum.get("/admin/pharmacy/reorderlevel/?stock=below").context["cl"].result_list) == []
    assert [str(b) for b in mum.get(RECEIVE).context["form"].fields["branch"].queryset] == [str(world.mum)]


def test_another_branchs_pharmacist_sees_and_exports_nothing_of_the_register(world, mum):
    world.receive(world.morph, "MO1", 10)
    prescription = world.prescribe((world.morph, 1))
    world.dispense((world.morph, 1), prescription=prescription)
    entry = ControlledDrugEntry.objects.get()

    listed = mum.get("/admin/pharmacy/controlleddrugentry/").context["cl"].result_list
    export = mum.post("/admin/pharmacy/controlleddrugentry/", {"action": "export_csv", "_selected_action": [entry.pk]})

    assert list(listed) == []
    rows = list(csv.reader(io.StringIO(export.content.decode())))
    assert (export.status_code, len(rows), rows[0][:2]) == (200, 1, ["Branch", "Date"])  # the header alone


def test_the_register_exports_with_balance_for_its_own_branch(world, blr):
    world.receive(world.morph, "MO1", 10)
    prescription = world.prescribe((world.morph, 4))
    world.dispense((world.morph, 1), prescription=prescription)
    world.dispense((world.morph, 3), prescription=prescription)
    world.receive(world.morph, "MO2", 5)  # later stock leaves each line's balance as it was then
    ids = list(ControlledDrugEntry.objects.order_by("id").values_list("pk", flat=True))

    export = blr.post("/admin/pharmacy/controlleddrugentry/", {"action": "export_csv", "_selected_action": ids})

    rows = list(csv.reader(io.StringIO(export.content.decode())))
    assert [(row[0], row[7], row[10], row[11]) for row in rows] == [
        ("Branch", "Drug", "Quantity", "Balance"),
        ("BLR", "MORPH10 Morphine 10 mg/ml injection", "1", "9"),
        ("BLR", "MORPH10 Morphine 10 mg/ml injection", "3", "6"),
    ]


def test_a_receptionist_without_pharmacy_permissions_gets_403_everywhere_and_changes_nothing(world, receptionist):
    world.receive(world.para, "P1", 10)
    prescription = world.prescribe((world.para, 4))
    dispense = world.dispense((world.para, 2), prescription=prescription)
    before = _state()

    answers = [
        receptionist.get(RECEIVE).status_code,
        receptionist.post(RECEIVE, _receipt(world)).status_code,
        receptionist.get(_dispense_url(prescription)).status_code,
        receptionist.post(_dispense_url(prescription), {"item-0-quantity": "2"}).status_code,
        receptionist.get(_return_url(dispense)).status_code,
        receptionist.post(_return_url(dispense), {"line-0-quantity": "1", "reason": "x"}).status_code,
        receptionist.get("/admin/pharmacy/reorderlevel/").status_code,
        receptionist.get("/admin/pharmacy/controlleddrugentry/").status_code,
    ]

    assert answers == [403] * 8
    assert _state() == before
