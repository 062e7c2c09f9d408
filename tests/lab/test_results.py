"""POST /api/v1/lab/orders/{id}/results (docs/api-rules.md §13): values checked against the analyte, flags from
the band for the patient's sex and age at collection, versions (preliminary, final, amended with a reason)
kept and shown, item and order statuses, the result events, and every refusal changing nothing."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clinic.errors import NotFound
from clinic.visibility import client_branch_ids
from integrations.webhooks.models import WebhookEvent
from lab import selectors, services
from lab.models import LabOrder, LabResult, Priority, RangeSex, ReferenceRange
from lab.representations import lab_order_representation
from tests.billing.factories import body, get, post_json
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import REQUEST_BOOKKEEPING, all_at_once, assert_problem, error_fields, row_counts
from tests.lab.order_factories import AnalyteFactory, LabTestFactory, imaging_test
from tests.patients.factories import PatientFactory

D = Decimal
ORDERS = "/api/v1/lab/orders"


@pytest.fixture
def world(token_for: Any) -> dict[str, Any]:
    blr = BranchFactory(code="BLR", state="Karnataka", time_zone="Asia/Kolkata")
    cbc = LabTestFactory(code="CBC", name="Complete blood count")
    hgb = AnalyteFactory(test=cbc, code="HGB", unit="g/dL", critical_low=D("7"), critical_high=D("20"), position=0)
    plt = AnalyteFactory(
        test=cbc, code="PLT", unit="10*3/uL", critical_low=D("20"), critical_high=D("1000"), position=1
    )
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.FEMALE, age_min_days=6570, low=D("12"), high=D("15.5"))
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.MALE, age_min_days=6570, low=D("13.5"), high=D("17.5"))
    ReferenceRange.objects.create(analyte=plt, sex=RangeSex.ANY, age_min_days=0, low=D("150"), high=D("450"))
    group = LabTestFactory(code="BLOOD-GROUP", name="Blood group")
    AnalyteFactory(test=group, code="ABO", unit="", value_type="coded", coded_values=["A", "B", "AB", "O"])
    xray = imaging_test(code="XR-CHEST", name="Chest X-ray")
    patient = PatientFactory(
        registration_branch=blr, gender="female", date_of_birth=timezone.localdate() - timedelta(days=30 * 365)
    )
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.add(blr)
    order = services.lab_order_create(
        branch=blr,
        patient=patient,
        doctor=doctor,
        tests=[cbc, group, xray],
        priority=Priority.ROUTINE,
        ordered_by="test",
    )
    services.lab_order_collect(order=order)
    return {
        "order": LabOrder.objects.get(pk=order.pk),
        "writer": token_for(["lab:write", "lab:read"], branches=[blr]),
        "reader": token_for(["lab:read"], branches=[blr]),
        "blr": blr,
        "patient": patient,
        "doctor": doctor,
        "cbc": cbc,
    }


def post(client: Any, world: dict[str, Any], results: list[dict[str, Any]], status: str = "final", **extra: Any) -> Any:
    payload = {
        "results": results,
        "performed_at": timezone.now().isoformat(),
        "performer": "K. Menon",
        "status": status,
        **extra,
    }
    return post_json(client, world["writer"], f"{ORDERS}/{world['order'].id}/results", payload)


CBC_NORMAL = [
    {"test": "CBC", "analyte": "HGB", "value": "13.1", "unit": "g/dL"},
    {"test": "CBC", "analyte": "PLT", "value": 250},
]


def results_of(data: dict[str, Any], test: str) -> dict[str, Any]:
    item = next(item for item in data["items"] if item["test"]["code"] == test)
    return {result["analyte"]["code"] if result["analyte"] else "report": result for result in item["results"]}


def event_types() -> list[str]:
    return list(WebhookEvent.objects.order_by("created_at").values_list("type", flat=True))


pytestmark = pytest.mark.django_db


def test_final_results_are_flagged_from_the_band_of_the_patients_sex_and_age(client, world):
    response = post(
        client,
        world,
        [
            {"test": "CBC", "analyte": "HGB", "value": "11.2", "unit": "g/dL"},  # female adult band 12-15.5: L
            {"test": "CBC", "analyte": "PLT", "value": 500, "note": "Checked on smear"},  # any band 150-450: H
        ],
    )

    assert response.status_code == 201, response.content
    assert response["Location"] == f"{ORDERS}/{world['order'].id}"
    data = body(response)
    cbc = results_of(data, "CBC")
    hgb = cbc["HGB"]["current"]
    assert (hgb["version"], hgb["status"], hgb["value_quantity"], hgb["unit"], hgb["flag"]) == (
        1,
        "final",
        D("11.2"),
        "g/dL",
        "L",
    )
    assert (hgb["reference_low"], hgb["reference_high"]) == (D("12"), D("15.5"))
    plt = cbc["PLT"]["current"]
    assert (plt["flag"], plt["unit"], plt["note"]) == ("H", "10*3/uL", "Checked on smear")
    assert cbc["HGB"]["history"] == []
    item = next(item for item in data["items"] if item["test"]["code"] == "CBC")
    assert item["status"] == "final"  # every analyte of CBC is final
    assert data["status"] == "resulted"  # the blood group and the X-ray are still open
    assert body(get(client, world["reader"], f"{ORDERS}/{world['order'].id}")) == data


def test_the_same_value_is_flagged_by_the_male_band_for_a_man(client, world):
    patient = world["patient"]
    patient.gender = "male"
    patient.save(update_fields=["gender"])

    data = body(post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "13.1"}]))

    assert results_of(data, "CBC")["HGB"]["current"]["flag"] == "L"  # male band starts at 13.5


def test_a_critical_value_publishes_lab_result_critical_at_once(client, world):
    before = event_types()

    response = post(client, world, [{"test": "CBC", "analyte": "PLT", "value": 12}], status="preliminary")

    assert results_of(body(response), "CBC")["PLT"]["current"]["flag"] == "LL"
    assert event_types()[len(before) :] == ["lab_result.critical"]


def test_the_order_becomes_final_when_every_item_is_and_publishes_lab_result_finalized(client, world):
    post(client, world, CBC_NORMAL)
    post(client, world, [{"test": "BLOOD-GROUP", "analyte": "ABO", "value": "o"}])  # coded: the catalogue spelling
    before = event_types()

    response = post(client, world, [{"test": "XR-CHEST", "value": "No active lung disease."}])

    data = body(response)
    assert data["status"] == "final"
    assert [item["status"] for item in data["items"]] == ["final", "final", "completed"]
    assert results_of(data, "BLOOD-GROUP")["ABO"]["current"]["value_text"] == "O"
    report = results_of(data, "XR-CHEST")["report"]["current"]
    assert (report["value_text"], report["flag"], report["unit"]) == ("No active lung disease.", None, None)
    assert event_types()[len(before) :] == ["lab_result.finalized"]


def test_a_preliminary_result_is_superseded_by_the_final_one_and_kept_in_its_history(client, world):
    post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "12.9"}], status="preliminary")

    data = body(post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "13.0"}]))

    hgb = results_of(data, "CBC")["HGB"]
    assert (hgb["current"]["version"], hgb["current"]["status"], hgb["current"]["value_quantity"]) == (
        2,
        "final",
        D("13"),
    )
    assert [(v["version"], v["status"], v["value_quantity"]) for v in hgb["history"]] == [(1, "preliminary", D("12.9"))]
    item = next(item for item in data["items"] if item["test"]["code"] == "CBC")
    assert item["status"] == "resulted"  # PLT has no result yet


def test_a_final_result_is_corrected_only_by_an_amendment_with_a_reason(client, world):
    post(client, world, CBC_NORMAL)
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    again = post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "14.0"}])
    no_reason = post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "14.0"}], status="amended")

    assert_problem(again, 409, "invalid_state", current_status="resulted")
    assert error_fields(no_reason) == ["reason"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts
    before = event_types()

    amended = post(
        client, world, [{"test": "CBC", "analyte": "HGB", "value": "14.0"}], status="amended", reason="Re-run"
    )

    hgb = results_of(body(amended), "CBC")["HGB"]
    assert (hgb["current"]["version"], hgb["current"]["status"], hgb["current"]["reason"]) == (2, "amended", "Re-run")
    assert [v["value_quantity"] for v in hgb["history"]] == [D("13.1")]
    assert event_types()[len(before) :] == ["lab_result.amended"]
    assert LabResult.objects.filter(analyte__code="HGB").count() == 2


def test_nothing_to_amend_is_a_400(client, world):
    response = post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "14"}], status="amended", reason="x")

    assert error_fields(response) == ["results.0.value"]


@pytest.mark.parametrize(
    ("result", "field"),
    [
        ({"test": "CBC", "analyte": "HGB", "value": "12,5"}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": "NaN"}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": "1e309"}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": ""}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": "-1"}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": "\u0661\u0662"}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": {"nested": 1}}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": "12", "unit": "10*3/uL"}, "results.0.unit"),  # PLT's unit
        ({"test": "CBC", "analyte": "LDL", "value": "12"}, "results.0.analyte"),
        ({"test": "CBC", "value": "12"}, "results.0.analyte"),
        ({"test": "LIPID", "analyte": "LDL", "value": "12"}, "results.0.test"),
        ({"test": "BLOOD-GROUP", "analyte": "ABO", "value": "Q"}, "results.0.value"),
        ({"test": "XR-CHEST", "analyte": "HGB", "value": "Fine"}, "results.0.analyte"),
        ({"test": "XR-CHEST", "value": "   "}, "results.0.value"),
        ({"test": "CBC", "analyte": "HGB", "value": "12", "colour": "red"}, "results.0.colour"),
    ],
)
def test_bad_results_are_400_naming_the_field_and_write_nothing(client, world, result, field):
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post(client, world, [result])

    assert error_fields(response) == [field]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_every_bad_result_of_a_post_is_named_and_none_is_written(client, world):
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post(
        client,
        world,
        [
            {"test": "CBC", "analyte": "HGB", "value": "13"},
            {"test": "CBC", "analyte": "PLT", "value": "abc"},
            {"test": "CBC", "analyte": "HGB", "value": "14"},
        ],
    )

    assert error_fields(response) == ["results.1.value", "results.2.analyte"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"performed_at": "2026-11-21T10:00:00"}, "performed_at"),  # no offset
        ({"performed_at": "2999-01-01T10:00:00+05:30"}, "performed_at"),
        ({"performer": "  "}, "performer"),
        ({"status": "verified"}, "status"),
    ],
)
def test_bad_headers_of_a_post_are_400(client, world, extra, field):
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post(client, world, CBC_NORMAL, **extra)

    assert error_fields(response) == [field]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_a_specimen_not_yet_collected_takes_no_result(client, world):
    order = services.lab_order_create(
        branch=world["blr"],
        patient=world["patient"],
        doctor=world["doctor"],
        tests=[world["cbc"]],
        priority=Priority.ROUTINE,
        ordered_by="test",
    )
    world["order"] = order
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post(client, world, CBC_NORMAL)

    problem = assert_problem(response, 409, "invalid_state", current_status="ordered")
    assert problem["detail"] == "results.0: the CBC specimen has not been collected; record the collection first."
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts
    assert LabOrder.objects.get(pk=order.pk).status == "ordered"


def test_a_cancelled_order_takes_no_result(client, world):
    order = services.lab_order_create(
        branch=world["blr"],
        patient=world["patient"],
        doctor=world["doctor"],
        tests=[world["cbc"]],
        priority=Priority.ROUTINE,
        ordered_by="test",
    )
    services.lab_order_cancel(order=order, reason="Ordered twice")
    world["order"] = order
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    assert_problem(post(client, world, CBC_NORMAL), 409, "invalid_state", current_status="cancelled")
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_another_branchs_order_is_404_and_the_read_scope_is_403(client, world, token_for):
    mum = BranchFactory(code="MUM", state="Maharashtra")
    outsider = token_for(["lab:write"], branches=[mum])
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)
    url = f"{ORDERS}/{world['order'].id}/results"
    payload = {"results": CBC_NORMAL, "performed_at": timezone.now().isoformat(), "performer": "x", "status": "final"}

    assert_problem(post_json(client, outsider, url, payload), 404, "not_found")
    assert post_json(client, world["reader"], url, payload).status_code == 403
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_a_childs_value_uses_no_adult_band(client, world):
    patient = world["patient"]
    patient.date_of_birth = date.today() - timedelta(days=400)
    patient.save(update_fields=["date_of_birth"])

    data = body(post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "11.2"}]))

    hgb = results_of(data, "CBC")["HGB"]["current"]
    assert (hgb["flag"], hgb["reference_low"]) == (None, None)  # no band for a one-year-old here, not critical


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_posts_on_one_item_are_both_kept(world):
    from django.test import Client

    def call(value: str) -> Any:
        def run() -> int:
            return post(
                Client(), world, [{"test": "CBC", "analyte": "HGB", "value": value}], status="preliminary"
            ).status_code

        return run

    statuses = all_at_once([call("12.1"), call("12.2")])

    assert statuses == [201, 201]
    versions = list(LabResult.objects.filter(analyte__code="HGB").order_by("version"))
    assert [v.version for v in versions] == [1, 2]
    assert {v.value_quantity for v in versions} == {D("12.1"), D("12.2")}
    assert [v.current for v in versions] == [False, True]


def test_one_400_names_the_posts_bad_fields_and_each_bad_result(client, world):
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post(
        client,
        world,
        [{"test": "CBC", "analyte": "HGB", "value": "12,5"}],
        performed_at=(timezone.now() + timedelta(hours=2)).isoformat(),
    )

    assert error_fields(response) == ["performed_at", "results.0.value"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_an_unknown_status_over_a_final_result_is_a_400_not_a_409(client, world):
    post(client, world, CBC_NORMAL)

    response = post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "14"}], status="verified")

    assert error_fields(response) == ["status"]


def _statements(call: Any) -> tuple[int, Any]:
    with CaptureQueriesContext(connection) as queries:
        response = call()
    return len(queries), response


def test_posting_results_takes_a_fixed_number_of_statements_however_many_results(client, world):
    """Pinned: authentication, the order's lock and reads, one INSERT for all new versions, the statuses (derived
    from what the post read and wrote, no re-read; an item whose status stays is not written), the audit row; a
    post of 10 results costs what a post of 2 does."""
    few, response = _statements(lambda: post(client, world, CBC_NORMAL, status="preliminary"))
    assert response.status_code == 201, response.content
    for position in range(2, 10):
        AnalyteFactory(test=world["cbc"], code=f"X{position}", unit="g/dL", position=position)
    ten = [*CBC_NORMAL, *({"test": "CBC", "analyte": f"X{p}", "value": p} for p in range(2, 10))]
    many, response = _statements(lambda: post(client, world, ten, status="preliminary"))
    assert response.status_code == 201, response.content
    assert len(results_of(body(response), "CBC")) == 10

    # The second also supersedes HGB's and PLT's preliminary versions (one UPDATE) and leaves the item resulted
    # (no write of its status).
    assert (few, many) == (16, 16)


def test_the_detail_reads_order_items_and_results_in_three_statements_and_hides_other_branches(
    client, world, api_client_factory
):
    """lab_order_get reads the order, its items and every result version in three statements, versions in
    their order, through the branch rule: a client of another branch does not see it."""
    post(client, world, [{"test": "CBC", "analyte": "HGB", "value": "12.9"}], status="preliminary")
    post(client, world, CBC_NORMAL)
    post(client, world, [{"test": "CBC", "analyte": "PLT", "value": 260}], status="amended", reason="Re-run")
    post(client, world, [{"test": "BLOOD-GROUP", "analyte": "ABO", "value": "O"}])
    reader = api_client_factory(scopes=["lab:read"], branches=[world["blr"]])
    outsider = api_client_factory(scopes=["lab:read"], branches=[BranchFactory(code="MUM", state="Maharashtra")])
    order_id = world["order"].id

    client_branch_ids(reader)  # the branch list comes with the token on a request
    with CaptureQueriesContext(connection) as queries:
        shown = lab_order_representation(selectors.lab_order_get(client=reader, ref=str(order_id)))

    assert len(queries) == 3
    cbc = results_of(dict(shown), "CBC")
    assert [version["version"] for version in cbc["HGB"]["history"]] == [1]
    assert (cbc["PLT"]["current"]["status"], cbc["PLT"]["current"]["version"]) == ("amended", 2)
    with pytest.raises(NotFound):
        selectors.lab_order_get(client=outsider, ref=str(order_id))
