"""The pharmacy in the admin: the drug catalogue with reorder levels inline, read-only batches with the
write-off action (a service call), the read-only ledger, prescriptions cancelled by an action, and the
controlled drug register exported as CSV (audited: it shows patients)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from integrations.models import AuditLogEntry
from pharmacy.models import ControlledDrugEntry, StockMovement
from tests.pharmacy.factories import PharmacyWorld, expire, make_pharmacy_world, on_hand, today

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(token_for) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


def _messages(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_the_pharmacy_pages_open(admin_client, world):
    world.receive(world.alpraz, "AL1", 10)
    prescription = world.prescribe((world.alpraz, 2))
    dispense = world.dispense((world.alpraz, 2), prescription=prescription)
    batch = dispense.lines.get().batch
    pages = [
        "/admin/pharmacy/drug/",
        f"/admin/pharmacy/drug/{world.para.pk}/change/",
        "/admin/pharmacy/batch/",
        f"/admin/pharmacy/batch/{batch.pk}/change/",
        "/admin/pharmacy/stockmovement/",
        "/admin/pharmacy/prescription/",
        f"/admin/pharmacy/prescription/{prescription.pk}/change/",
        "/admin/pharmacy/dispense/",
        f"/admin/pharmacy/dispense/{dispense.pk}/change/",
        "/admin/pharmacy/controlleddrugentry/",
    ]

    assert [admin_client.get(page).status_code for page in pages] == [200] * len(pages)
    assert admin_client.get("/admin/pharmacy/batch/add/").status_code == 403
    assert admin_client.get(f"/admin/pharmacy/dispense/{dispense.pk}/delete/").status_code == 403


def test_the_write_off_action_empties_expired_batches_and_refuses_fresh_ones(admin_client, world):
    old = expire(world.receive(world.para, "OLD", 9))
    fresh = world.receive(world.para, "NEW", 4)

    response = admin_client.post(
        "/admin/pharmacy/batch/", {"action": "write_off_expired", "_selected_action": [old.pk, fresh.pk]}, follow=True
    )

    assert response.status_code == 200
    assert (on_hand(old), on_hand(fresh)) == (0, 4)
    movement = StockMovement.objects.get(kind="expiry_write_off")
    assert (movement.quantity, movement.actor) == (-9, "staff:admin")
    assert any("has not expired" in message for message in _messages(response))


def test_the_register_exports_as_csv_and_the_export_is_audited(admin_client, world):
    world.receive(world.alpraz, "AL1", 10)
    world.receive(world.morph, "MO1", 10)
    prescription = world.prescribe((world.alpraz, 2), (world.morph, 1))
    dispense = world.dispense((world.alpraz, 2), (world.morph, 1), prescription=prescription)
    entries = list(ControlledDrugEntry.objects.order_by("id"))

    response = admin_client.post(
        "/admin/pharmacy/controlleddrugentry/",
        {"action": "export_csv", "_selected_action": [entry.pk for entry in entries]},
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    patient = f"{world.patient.patient_id} {world.patient.name}"
    alpraz = entries[0].batch
    morph = entries[1].batch
    time = f"{timezone.localtime(dispense.created_at, world.blr.zone):%H:%M}"  # at the branch
    assert rows == [
        [
            "Branch",
            "Date",
            "Time",
            "Dispense",
            "Patient",
            "Prescriber",
            "Prescription",
            "Drug",
            "Schedule",
            "Batch",
            "Quantity",
            "Balance",
        ],
        [
            "BLR",
            today().isoformat(),
            time,
            dispense.dispense_number,
            patient,
            "Dr. Anil Rao",
            prescription.prescription_number,
            "ALPRAZ05 Alprazolam 0.5 mg tablet",
            "H1",
            f"AL1 (exp. {alpraz.expiry_date:%Y-%m-%d})",
            "2",
            "8",
        ],
        [
            "BLR",
            today().isoformat(),
            time,
            dispense.dispense_number,
            patient,
            "Dr. Anil Rao",
            prescription.prescription_number,
            "MORPH10 Morphine 10 mg/ml injection",
            "X",
            f"MO1 (exp. {morph.expiry_date:%Y-%m-%d})",
            "1",
            "9",
        ],
    ]
    row = AuditLogEntry.objects.filter(path="/admin/pharmacy/controlleddrugentry/").latest("id")
    assert (row.actor, [str(p) for p in row.patient_ids]) == ("staff:admin", [str(world.patient.id)])


def test_the_cancel_action_cancels_with_a_reason_through_the_service(admin_client, world):
    prescription = world.prescribe((world.amox, 5))

    response = admin_client.post(
        "/admin/pharmacy/prescription/",
        {"action": "cancel", "_selected_action": [prescription.pk], "reason": "Duplicate", "confirm": "yes"},
        follow=True,
    )

    assert response.status_code == 200
    prescription.refresh_from_db()
    assert (prescription.status, prescription.cancellation_reason) == ("cancelled", "Duplicate")


def test_the_transfer_action_moves_units_through_the_service(admin_client, world):
    batch = world.receive(world.para, "TR1", 20)

    page = admin_client.post("/admin/pharmacy/batch/", {"action": "transfer", "_selected_action": [batch.pk]})
    response = admin_client.post(
        "/admin/pharmacy/batch/",
        {
            "action": "transfer",
            "_selected_action": [batch.pk],
            "to_branch": world.mum.pk,
            "quantity": 8,
            "reason": "Rebalance",
            "confirm": "yes",
        },
        follow=True,
    )

    assert page.status_code == 200
    assert b"Transfer stock" in page.content
    assert response.status_code == 200
    there = batch.__class__.objects.get(branch=world.mum, batch_number="TR1")
    assert (on_hand(batch), on_hand(there)) == (12, 8)
    kinds = list(StockMovement.objects.filter(kind__startswith="transfer").values_list("kind", "quantity", "actor"))
    assert sorted(kinds) == [("transfer_in", 8, "staff:admin"), ("transfer_out", -8, "staff:admin")]


def test_the_batch_list_says_expired_in_words_not_with_a_green_tick(admin_client, world):
    expire(world.receive(world.para, "OLD", 9))
    world.receive(world.para, "SOON", 4, expires_in_days=30)
    world.receive(world.para, "LATER", 4, expires_in_days=365)

    page = admin_client.get("/admin/pharmacy/batch/")

    assert page.status_code == 200
    by_batch = {
        batch.batch_number: page.context["cl"].model_admin.expired(batch) for batch in page.context["cl"].result_list
    }
    assert by_batch == {"OLD": "EXPIRED", "SOON": "expires in 30 days", "LATER": "in date"}
    assert "icon-yes.svg" not in page.content.decode()


def test_prescription_and_dispense_pages_label_items_by_drug_never_by_uuid(admin_client, world):
    import re

    world.receive(world.para, "P1", 20)
    prescription = world.prescribe((world.para, 4))
    dispense = world.dispense((world.para, 4), prescription=prescription)
    pages = [
        f"/admin/pharmacy/prescription/{prescription.pk}/change/",
        f"/admin/pharmacy/dispense/{dispense.pk}/change/",
    ]

    for page in pages:
        html = admin_client.get(page).content.decode()
        labels = [label.strip() for label in re.findall(r"<p>([^<]*)</p>", html)]  # tabular inline rows
        assert f"{world.para.code} x 4" in labels, (page, labels)
        assert not re.search(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} x \d", html), page


def test_the_batch_list_filters_by_expiry_status_looking_forward(admin_client, world):
    expire(world.receive(world.para, "OLD", 9))
    world.receive(world.para, "SOON", 4, expires_in_days=30)
    world.receive(world.para, "LATER", 4, expires_in_days=365)

    def listed(status: str) -> list[str]:
        page = admin_client.get("/admin/pharmacy/batch/", {"expiry": status})
        assert page.status_code == 200
        return sorted(batch.batch_number for batch in page.context["cl"].result_list)

    assert listed("expired") == ["OLD"]
    assert listed("expiring") == ["SOON"]
    assert listed("in_date") == ["LATER"]
    assert "Expires within 90 days" in admin_client.get("/admin/pharmacy/batch/").content.decode()
