"""generate_scale_data's lab orders (issue 16) at small scale: every invariant the lab services keep also holds
for the generated rows (numbering, statuses, versions, flags), and the API reads them."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from appointments.models import Appointment
from lab import interpretation
from lab.devdata.scale import CATALOGUE, COMBINATIONS
from lab.models import Analyte, LabOrder, LabResult, ReferenceRange
from tests.helpers import bearer
from tests.helpers import sql_scalar as scalar

pytestmark = pytest.mark.django_db

TESTS = {test.code: test for test in CATALOGUE}
SMALL = ["--patients", "400", "--invoices", "50", "--doctors", "8", "--branches", "3", "--today", "2026-11-21"]


@pytest.fixture
def generated() -> str:
    out = StringIO()
    call_command("generate_scale_data", *SMALL, "--seed", "4", stdout=out)
    return out.getvalue()


def test_about_one_order_per_completed_appointment_with_3_to_20_results_per_lab_order(generated: str) -> None:
    completed = Appointment.objects.filter(status="completed").count()
    with_appointment = LabOrder.objects.filter(appointment__isnull=False).count()
    assert with_appointment == completed
    assert 0.15 * completed < LabOrder.objects.filter(appointment__isnull=True).count() < 0.25 * completed
    # An order made during a visit is that visit's patient's, at its branch, by its doctor, while it lasted.
    assert scalar("""
        SELECT count(*) FROM lab_laborder o JOIN appointments_appointment a ON a.id = o.appointment_id
         WHERE (o.patient_id, o.branch_id, o.doctor_id) IS DISTINCT FROM (a.patient_id, a.branch_id, a.doctor_id)
            OR o.created_at NOT BETWEEN a.checked_in_at AND a.completed_at""") == 0  # fmt: skip
    counts = scalar("""
        SELECT array[min(n), max(n)] FROM (
            SELECT count(*) n FROM lab_labresult r JOIN lab_laborderitem i ON i.id = r.item_id
              JOIN lab_laborder o ON o.id = i.order_id JOIN lab_labtest t ON t.id = i.test_id
             WHERE o.status = 'final' AND t.kind = 'lab' AND r.current GROUP BY o.id) s""")
    assert isinstance(counts, list)
    assert counts[0] >= 3
    assert counts[1] <= 20
    lab_sizes = [
        sum(len(TESTS[code].analytes) for code in codes) for codes, _ in COMBINATIONS if TESTS[codes[0]].kind == "lab"
    ]
    assert (min(lab_sizes), max(lab_sizes)) == (3, 20)
    assert "lab orders (" in generated


def test_order_and_accession_numbers_are_consecutive_per_branch_and_year_and_match_the_counters(
    generated: str,
) -> None:
    for table, column, counter in (
        ("lab_laborder", "order_number", "lab_labordercounter"),
        ("lab_laborderitem i JOIN lab_laborder o ON o.id = i.order_id", "accession_number", "lab_accessioncounter"),
    ):
        number = f"split_part({column}, '-', array_length(string_to_array({column}, '-'), 1))::int"
        year = "extract(year FROM timezone('Asia/Kolkata', o.created_at))::int"
        source = table if " o " in table else f"{table} o"
        assert scalar(f"""
            SELECT count(*) FROM (
                SELECT o.branch_id, {year} AS year, count(*) n, min({number}) lo, max({number}) hi,
                       count(DISTINCT {number}) d FROM {source} GROUP BY 1, 2) s
             FULL JOIN {counter} c USING (branch_id, year)
             WHERE s.lo IS DISTINCT FROM 1 OR s.hi IS DISTINCT FROM s.n OR s.d IS DISTINCT FROM s.n
                OR c.last_number IS DISTINCT FROM s.hi""") == 0  # noqa: S608 - fixed table names  # fmt: skip
    # Numbers follow creation order within a branch and year.
    assert scalar("""
        SELECT count(*) FROM (
            SELECT order_number, lag(order_number) OVER (PARTITION BY branch_id,
                   extract(year FROM timezone('Asia/Kolkata', created_at)) ORDER BY created_at, order_number) prev
              FROM lab_laborder) s WHERE prev > order_number""") == 0  # fmt: skip


def test_statuses_and_versions_follow_the_rules_of_the_results_service(generated: str) -> None:
    # A cancelled order has its reason, cancelled items and no result; nothing else is cancelled.
    assert scalar("""
        SELECT count(*) FROM lab_laborder o WHERE (status = 'cancelled') <> EXISTS (
            SELECT 1 FROM lab_laborderitem i WHERE i.order_id = o.id AND i.status = 'cancelled')""") == 0  # fmt: skip
    assert scalar("SELECT count(*) FROM lab_labresult r JOIN lab_laborderitem i ON i.id = r.item_id "
                  "WHERE i.status IN ('cancelled', 'ordered', 'collected', 'scheduled')") == 0  # fmt: skip
    # A final lab item has exactly one current final or amended result per analyte of its test.
    assert scalar("""
        SELECT count(*) FROM lab_laborderitem i JOIN lab_analyte a ON a.test_id = i.test_id
         WHERE i.status = 'final' AND (SELECT count(*) FROM lab_labresult r WHERE r.item_id = i.id
               AND r.analyte_id = a.id AND r.current AND r.status IN ('final', 'amended')) <> 1""") == 0  # fmt: skip
    # A final order's items are all final or completed; older orders are settled, the last two days in flight.
    assert scalar("""
        SELECT count(*) FROM lab_laborder o JOIN lab_laborderitem i ON i.order_id = o.id
         WHERE o.status = 'final' AND i.status NOT IN ('final', 'completed')""") == 0  # fmt: skip
    assert scalar("SELECT count(*) FROM lab_laborder WHERE status NOT IN ('final', 'cancelled') "
                  "AND created_at < '2026-11-19'") == 0  # fmt: skip
    assert scalar("SELECT count(*) FROM lab_laborder WHERE status = 'ordered' AND collected_at IS NOT NULL") == 0
    # An amendment keeps the first version (no longer current) and carries its reason.
    amended = LabResult.objects.filter(status="amended")
    assert amended.exists()
    assert not amended.exclude(version=2, current=True).exclude(reason="").filter(reason="").exists()
    assert scalar("""
        SELECT count(*) FROM lab_labresult r WHERE r.status = 'amended' AND NOT EXISTS (
            SELECT 1 FROM lab_labresult f WHERE f.item_id = r.item_id AND f.analyte_id = r.analyte_id
               AND f.version = 1 AND NOT f.current AND f.status = 'final')""") == 0  # fmt: skip


def test_every_flag_and_reference_limit_is_what_lab_interpretation_gives(generated: str) -> None:
    ranges: dict[object, list[ReferenceRange]] = {}
    for band in ReferenceRange.objects.all():
        ranges.setdefault(band.analyte_id, []).append(band)
    analytes = {a.id: a for a in Analyte.objects.all()}
    results = LabResult.objects.filter(value_quantity__isnull=False).select_related(
        "item__order__patient", "item__order__branch"
    )
    flags = set()
    for result in results:
        order = result.item.order
        day = (order.collected_at or result.performed_at).astimezone(order.branch.zone).date()
        age = max(0, interpretation.age_in_days(order.patient.date_of_birth, day))
        parsed = interpretation.ParsedValue(quantity=result.value_quantity, text="", unit=result.unit)
        expected = interpretation.interpretation_for(
            analytes[result.analyte_id], parsed, ranges=ranges.get(result.analyte_id, []), sex=order.patient.gender,
            age_days=age,
        )  # fmt: skip
        assert (result.flag, result.reference_low, result.reference_high) == (
            expected.flag, expected.reference_low, expected.reference_high
        ), result.id  # fmt: skip
        assert result.unit == analytes[result.analyte_id].unit
        flags.add(result.flag)
    assert {"N", "L", "H"} <= flags


def test_verified_critical_values_were_acknowledged_when_recorded_and_nothing_else_was(generated: str) -> None:
    critical = LabResult.objects.filter(flag__in=["LL", "HH"], status__in=["final", "amended"])
    acknowledged = LabResult.objects.filter(critical_acknowledged_at__isnull=False)

    assert critical.exists(), "no verified critical value generated: the check would prove nothing"
    assert set(acknowledged.values_list("id", flat=True)) == set(critical.values_list("id", flat=True))
    for result in critical:
        assert (result.critical_acknowledged_at, result.critical_acknowledged_by) == (result.recorded_at, "staff:lab")
    # So the list of values awaiting acknowledgement holds only preliminary ones, as in a working laboratory.
    waiting = LabResult.objects.filter(current=True, flag__in=["LL", "HH"], critical_acknowledged_at__isnull=True)
    assert set(waiting.values_list("status", flat=True)) <= {"preliminary"}


def test_the_api_reads_a_generated_order_and_lists_a_patients_orders(generated: str, client, token_for) -> None:
    order = LabOrder.objects.filter(status="final", items__results__status="amended").first()
    assert order is not None
    response = client.get(f"/api/v1/lab/orders/{order.id}", **bearer(token_for(["lab:read"])))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["order_number"] == order.order_number
    assert body["status"] == "final"
    amended = [r for item in body["items"] for r in item["results"] if r["current"]["status"] == "amended"]
    assert amended
    for result in amended:
        assert result["current"]["version"] == 2
        assert result["current"]["reason"] == "Transcription error corrected"
        assert [(v["version"], v["status"]) for v in result["history"]] == [(1, "final")]
    stored = LabResult.objects.filter(item__order=order, current=True).count()
    assert sum(len(item["results"]) for item in body["items"]) == stored
    response = client.get(
        "/api/v1/lab/orders",
        {"patient_id": order.patient.patient_id, "per_page": 100},
        **bearer(token_for(["lab:read"])),
    )
    assert response.status_code == 200, response.content
    assert int(response["X-Total-Count"]) == LabOrder.objects.filter(patient=order.patient).count()
    assert str(order.id) in {o["order_id"] for o in response.json()}
