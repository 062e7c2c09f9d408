"""generate_scale_data's pharmacy (issue 17) at small scale: every invariant the pharmacy services and the ledger
keep also holds for the generated rows (ledger and shelf agree, first expiry first out from non-expired batches
received before, prescriptions never overdispensed, gap-free numbers, the register), and the API reads and
writes on top of them."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from appointments.models import Appointment
from pharmacy.models import Dispense, DispenseCounter, Drug
from tests.billing.factories import body, get, post_json
from tests.helpers import sql_scalar as scalar
from tests.pharmacy.factories import DISPENSES, STOCK, today

pytestmark = pytest.mark.django_db

SMALL = ["--patients", "400", "--invoices", "50", "--doctors", "8", "--branches", "3", "--drugs", "60"]
SMALL += ["--today", "2026-11-21"]


@pytest.fixture
def generated() -> str:
    out = StringIO()
    call_command("generate_scale_data", *SMALL, "--seed", "5", stdout=out)
    return out.getvalue()


def test_about_one_dispense_per_completed_appointment_and_a_catalogue_stocked_at_every_branch(generated: str) -> None:
    completed = Appointment.objects.filter(status="completed").count()
    assert 0.8 * completed < Dispense.objects.count() < 1.1 * completed
    assert Drug.objects.count() == 60
    assert set(Drug.objects.values_list("schedule", flat=True)) == {"OTC", "H", "H1", "X"}
    # Every branch holds non-expired stock of most of the catalogue today.
    assert scalar("""
        SELECT min(n) FROM (SELECT count(DISTINCT drug_id) n FROM pharmacy_batch
         WHERE quantity_on_hand > 0 AND expiry_date > '2026-11-21' GROUP BY branch_id) s""") >= 35  # fmt: skip
    assert "60 drugs in " in generated


def test_the_ledger_and_the_shelf_agree_and_no_batch_was_ever_short(generated: str) -> None:
    assert scalar("""
        SELECT count(*) FROM pharmacy_batch b WHERE quantity_on_hand <> (
            SELECT sum(quantity) FROM pharmacy_stockmovement m WHERE m.batch_id = b.id)""") == 0  # fmt: skip
    # Replayed in time order, no batch's running balance ever goes below zero (receipts come first).
    assert scalar("""
        SELECT count(*) FROM (SELECT sum(quantity) OVER (PARTITION BY batch_id ORDER BY at, id) running
          FROM pharmacy_stockmovement) s WHERE running < 0""") == 0  # fmt: skip
    # Every batch was filled by exactly one receipt, at its reception; expired stock older than a month is
    # written off, all of it.
    assert scalar("""
        SELECT count(*) FROM pharmacy_batch b WHERE (SELECT count(*) FROM pharmacy_stockmovement m
         WHERE m.batch_id = b.id AND m.kind = 'receipt' AND m.at = b.received_at) <> 1""") == 0  # fmt: skip
    assert scalar("""
        SELECT count(*) FROM pharmacy_batch WHERE quantity_on_hand > 0
           AND expiry_date < date '2026-11-21' - 31""") == 0  # fmt: skip
    assert scalar("SELECT count(*) FROM pharmacy_stockmovement WHERE kind = 'expiry_write_off'") > 0


def test_dispenses_take_first_expiry_first_from_non_expired_batches_received_before(generated: str) -> None:
    local_day = "(d.created_at AT TIME ZONE 'Asia/Kolkata')::date"
    assert scalar(f"""
        SELECT count(*) FROM pharmacy_dispenseline l JOIN pharmacy_batch b ON b.id = l.batch_id
          JOIN pharmacy_dispense d ON d.id = l.dispense_id
         WHERE b.expiry_date <= {local_day} OR b.received_at > d.created_at OR b.branch_id <> d.branch_id
            OR l.drug_id <> b.drug_id OR l.unit_price <> b.mrp""") == 0  # noqa: S608 - fixed SQL  # fmt: skip
    # No batch expiring earlier, usable then, was passed over: its balance was empty after the dispense (which
    # may have emptied it first, a line of its own).
    assert scalar(f"""
        SELECT count(*) FROM pharmacy_dispenseline l JOIN pharmacy_batch b ON b.id = l.batch_id
          JOIN pharmacy_dispense d ON d.id = l.dispense_id
          JOIN pharmacy_batch e ON e.drug_id = b.drug_id AND e.branch_id = b.branch_id
               AND e.expiry_date < b.expiry_date AND e.expiry_date > {local_day} AND e.received_at <= d.created_at
         WHERE (SELECT coalesce(sum(m.quantity), 0) FROM pharmacy_stockmovement m
                 WHERE m.batch_id = e.id AND m.at <= d.created_at) > 0""") == 0  # noqa: S608 - fixed SQL  # fmt: skip
    # One movement per line, of its quantity, at the dispense.
    assert scalar("""
        SELECT count(*) FROM pharmacy_dispenseline l JOIN pharmacy_dispense d ON d.id = l.dispense_id
         WHERE (SELECT array_agg(array[m.quantity]) FROM pharmacy_stockmovement m WHERE m.dispense_line_id = l.id
                   AND m.kind = 'dispense' AND m.at = d.created_at) <> array[array[-l.quantity]]""") == 0  # fmt: skip


def test_prescriptions_are_never_overdispensed_and_their_statuses_follow_the_services(generated: str) -> None:
    assert scalar("""
        SELECT count(*) FROM pharmacy_prescriptionitem i WHERE dispensed_quantity <> (
            SELECT coalesce(sum(quantity - returned_quantity), 0) FROM pharmacy_dispenseline l
             WHERE l.prescription_item_id = i.id)""") == 0  # fmt: skip
    assert scalar("""
        SELECT count(*) FROM pharmacy_prescription p WHERE status <> CASE
            WHEN cancelled_at IS NOT NULL THEN 'cancelled'
            WHEN EXISTS (SELECT 1 FROM pharmacy_prescriptionitem i WHERE i.prescription_id = p.id
                          AND i.dispensed_quantity < i.quantity) THEN 'active'
            ELSE 'completed' END""") == 0  # fmt: skip
    assert scalar("""
        SELECT count(*) FROM pharmacy_dispense d JOIN pharmacy_prescription p ON p.id = d.prescription_id
         WHERE p.status = 'cancelled' OR d.patient_id <> p.patient_id OR d.branch_id <> p.branch_id
            OR d.created_at < p.created_at""") == 0  # fmt: skip
    # A prescription is written during its visit, by its doctor, for its patient, at its branch.
    assert scalar("""
        SELECT count(*) FROM pharmacy_prescription p JOIN appointments_appointment a ON a.id = p.appointment_id
         WHERE (p.patient_id, p.branch_id, p.doctor_id) IS DISTINCT FROM (a.patient_id, a.branch_id, a.doctor_id)
            OR p.created_at NOT BETWEEN a.checked_in_at AND a.completed_at""") == 0  # fmt: skip
    # Each item is its patient's medication for the course, from the local day it was written.
    assert scalar("""
        SELECT count(*) FROM pharmacy_prescriptionitem i JOIN pharmacy_prescription p ON p.id = i.prescription_id
          JOIN patients_medication m ON m.id = i.medication_id
         WHERE m.patient_id <> p.patient_id OR m.start_date <> (p.created_at AT TIME ZONE 'Asia/Kolkata')::date
            OR (p.status <> 'cancelled' AND m.end_date <> m.start_date + i.duration_days - 1)""") == 0  # fmt: skip
    assert scalar("SELECT count(*) FROM pharmacy_prescriptionitem WHERE medication_id IS NULL") == 0
    assert set(scalar("SELECT array_agg(DISTINCT status) FROM pharmacy_prescription")) == {  # type: ignore[arg-type]
        "active",
        "completed",
        "cancelled",
    }


def test_prescription_drugs_only_against_a_prescription_and_h1_and_x_in_the_register(generated: str) -> None:
    assert scalar("""
        SELECT count(*) FROM pharmacy_dispenseline l JOIN pharmacy_dispense d ON d.id = l.dispense_id
          JOIN pharmacy_drug g ON g.id = l.drug_id
         WHERE g.schedule <> 'OTC' AND d.prescription_id IS NULL""") == 0  # fmt: skip
    assert scalar("""
        SELECT count(*) FROM pharmacy_dispenseline l JOIN pharmacy_dispense d ON d.id = l.dispense_id
          JOIN pharmacy_drug g ON g.id = l.drug_id
          FULL JOIN pharmacy_controlleddrugentry r ON r.dispense_line_id = l.id
         WHERE (g.schedule IN ('H1', 'X')) <> (r.id IS NOT NULL)
            OR r.quantity <> l.quantity OR r.batch_id <> l.batch_id OR r.patient_id <> d.patient_id
            OR r.dispense_number <> d.dispense_number
            OR r.date <> (d.created_at AT TIME ZONE 'Asia/Kolkata')::date""") == 0  # fmt: skip
    assert scalar("SELECT count(*) FROM pharmacy_controlleddrugentry") > 0


def test_numbers_are_consecutive_per_branch_and_year_in_creation_order_and_match_the_counters(generated: str) -> None:
    for table, column, counter in (
        ("pharmacy_prescription", "prescription_number", "pharmacy_prescriptioncounter"),
        ("pharmacy_dispense", "dispense_number", "pharmacy_dispensecounter"),
    ):
        number = f"split_part({column}, '-', 4)::int"
        year = "extract(year FROM timezone('Asia/Kolkata', created_at))::int"
        assert scalar(f"""
            SELECT count(*) FROM (
                SELECT branch_id, {year} AS year, count(*) n, min({number}) lo, max({number}) hi,
                       count(DISTINCT {number}) d FROM {table} GROUP BY 1, 2) s
             FULL JOIN {counter} c USING (branch_id, year)
             WHERE s.lo IS DISTINCT FROM 1 OR s.hi IS DISTINCT FROM s.n OR s.d IS DISTINCT FROM s.n
                OR c.last_number IS DISTINCT FROM s.hi""") == 0  # noqa: S608 - fixed table names  # fmt: skip
        assert scalar(f"""
            SELECT count(*) FROM (SELECT {number} AS number, lag({number}) OVER (PARTITION BY branch_id, {year}
                   ORDER BY created_at, {number}) prev FROM {table}) s
             WHERE prev > number""") == 0  # noqa: S608 - fixed table names  # fmt: skip


def test_the_api_reads_the_generated_stock_and_dispenses_from_it(generated: str, client, token_for) -> None:
    branch_id, drug_code, on_hand = scalar("""
        SELECT array[b.branch_id::text, g.code, sum(b.quantity_on_hand)::text] FROM pharmacy_batch b
          JOIN pharmacy_drug g ON g.id = b.drug_id
         WHERE g.schedule = 'OTC' AND b.quantity_on_hand > 0 AND b.expiry_date > current_date + 1
         GROUP BY b.branch_id, g.code ORDER BY sum(b.quantity_on_hand) DESC, g.code LIMIT 1""")  # type: ignore[misc]  # fmt: skip
    reader = token_for(["pharmacy:read"])
    listed = get(client, reader, STOCK, {"branch_id": branch_id, "drug": drug_code})
    assert listed.status_code == 200
    [entry] = body(listed)
    assert entry["on_hand"] + entry["expired_on_hand"] >= int(on_hand) > 0
    assert listed.headers["X-Total-Count"] == "1"
    whole = get(client, reader, STOCK, {"branch_id": branch_id, "per_page": "100"})
    codes = [e["drug"]["code"] for e in body(whole)]
    assert codes == sorted(codes)
    assert len(codes) == len(set(codes))

    first = scalar(f"""
        SELECT b.batch_number FROM pharmacy_batch b JOIN pharmacy_drug g ON g.id = b.drug_id
         WHERE g.code = '{drug_code}' AND b.branch_id = '{branch_id}' AND b.quantity_on_hand >= 2
           AND b.expiry_date > (now() AT TIME ZONE 'Asia/Kolkata')::date
         ORDER BY b.expiry_date, b.received_at, b.id LIMIT 1""")  # noqa: S608 - generated values  # fmt: skip
    year = today().year  # the branch-local year (every generated branch is in Asia/Kolkata)
    last = DispenseCounter.objects.filter(branch_id=branch_id, year=year).values_list("last_number", flat=True).first()
    writer = token_for(["pharmacy:write", "pharmacy:read"])
    items = [{"drug": drug_code, "quantity": 2}]
    response = post_json(client, writer, DISPENSES, {"branch_id": branch_id, "items": items})

    assert response.status_code == 201, response.content
    dispensed = body(response)
    assert [line["batch_number"] for line in dispensed["lines"]] == [first]
    # The number series goes on from the generated counter.
    assert dispensed["dispense_number"].endswith(f"-{(last or 0) + 1:06d}")
