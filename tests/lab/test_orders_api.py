"""POST/GET /api/v1/lab/orders and the collect and cancel transitions (docs/api-rules.md §13): exact bodies,
numbering, billing on the draft invoice, refusals that write nothing, states, branch visibility and events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.models import Invoice, LineItem
from integrations.webhooks.models import WebhookEvent
from lab import services
from lab.models import LabOrder, LabOrderItem, LabResult
from lab.services import MAX_TESTS
from tests.appointments.factories import AppointmentFactory
from tests.billing.factories import get, make_invoice, post_json
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, bearer, error_fields, row_counts
from tests.lab.order_factories import ORDERS, AnalyteFactory, LabWorld, make_lab_world
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(token_for: Any) -> LabWorld:
    return make_lab_world(token_for)


def _create(lab: LabWorld, **changes: Any) -> Any:
    body = {
        "patient_id": lab.patient.patient_id,
        "doctor_id": str(lab.doctor.id),
        "tests": ["CBC", "XR-CHEST"],
        "priority": "urgent",
        **changes,
    }
    return post_json(Client(), lab.writer, ORDERS, body)


def _year() -> int:
    return timezone.localtime(timezone.now()).year


def test_create_answers_201_with_the_exact_order(lab: LabWorld) -> None:
    response = _create(lab, clinical_notes="Fever for five days")

    assert response.status_code == 201, response.content
    order = LabOrder.objects.get()
    cbc_item, xray_item = LabOrderItem.objects.order_by("position")
    year, yy = _year(), _year() % 100
    assert response["Location"] == f"/api/v1/lab/orders/{order.id}"
    assert response.json() == {
        "id": str(order.id),
        "order_id": str(order.id),
        "order_number": f"BLR-LAB-{year}-000001",
        "status": "ordered",
        "priority": "urgent",
        "patient": {"id": str(lab.patient.id), "patient_id": lab.patient.patient_id, "name": "Priya Sharma"},
        "doctor": {"id": str(lab.doctor.id), "name": "Dr. Anil Rao"},
        "branch_id": str(lab.blr.id),
        "appointment_id": None,
        "clinical_notes": "Fever for five days",
        "invoice_id": None,
        "items": [
            {
                "id": str(cbc_item.id),
                "item_id": str(cbc_item.id),
                "test": {"code": "CBC", "name": "Complete blood count", "loinc_code": "58410-2", "kind": "lab"},
                "accession_number": f"BLR-{yy:02d}-0000001",
                "status": "ordered",
                "modality": None,
                "study_instance_uid": None,
                "specimen_type": "Whole blood",
                "results": [],
            },
            {
                "id": str(xray_item.id),
                "item_id": str(xray_item.id),
                "test": {"code": "XR-CHEST", "name": "Chest X-ray PA view", "loinc_code": "36643-5", "kind": "imaging"},
                "accession_number": f"BLR-{yy:02d}-0000002",
                "status": "scheduled",
                "modality": "XR",
                "study_instance_uid": f"2.25.{xray_item.id.int}",
                "specimen_type": None,
                "results": [],
            },
        ],
        "created_at": order.created_at.astimezone(lab.blr.zone).isoformat(),
        "collected_at": None,
        "cancelled_at": None,
        "cancellation_reason": None,
    }
    assert order.ordered_by.startswith("api:")
    assert response.json()["created_at"].endswith("+05:30")


def test_order_and_accession_numbers_are_consecutive_per_branch(lab: LabWorld) -> None:
    numbers = [_create(lab).json() for _ in range(3)]
    year, yy = _year(), _year() % 100

    assert [o["order_number"] for o in numbers] == [f"BLR-LAB-{year}-{n:06d}" for n in (1, 2, 3)]
    accessions = [item["accession_number"] for o in numbers for item in o["items"]]
    assert accessions == [f"BLR-{yy:02d}-{n:07d}" for n in range(1, 7)]
    # Another branch has its own series.
    mum_order = lab.order(branch=lab.mum, doctor=lab.mum_doctor)
    assert mum_order.order_number == f"MUM-LAB-{year}-000001"
    assert mum_order.items.get().accession_number == f"MUM-{yy:02d}-0000001"


def test_branch_id_defaults_to_the_clients_only_branch_and_priority_to_routine(lab: LabWorld) -> None:
    response = post_json(
        Client(),
        lab.writer,
        ORDERS,
        {"patient_id": str(lab.patient.id), "doctor_id": str(lab.doctor.id), "tests": ["CBC"]},
    )

    assert response.status_code == 201, response.content
    assert (response.json()["branch_id"], response.json()["priority"]) == (str(lab.blr.id), "routine")


def test_an_appointment_of_the_patient_at_the_branch_is_linked(lab: LabWorld) -> None:
    appointment = AppointmentFactory(branch=lab.blr, doctor=lab.doctor, patient=lab.patient)

    response = _create(lab, appointment_id=str(appointment.id))

    assert response.status_code == 201, response.content
    assert response.json()["appointment_id"] == str(appointment.id)


# --- bill: true


def test_bill_creates_a_draft_with_one_line_per_test(lab: LabWorld) -> None:
    response = _create(lab, bill=True)

    assert response.status_code == 201, response.content
    invoice = Invoice.objects.get()
    assert response.json()["invoice_id"] == str(invoice.id)
    assert (invoice.status, invoice.branch_id, invoice.patient_id) == ("draft", lab.blr.id, lab.patient.id)
    lines = list(
        invoice.line_items.order_by("position").values_list("service__code", "service_name", "rate", "hsn_sac")
    )
    assert lines == [
        ("LAB-CBC", "Complete blood count", Decimal("350.00"), "999316"),
        ("IMG-XR-CHEST", "Chest X-ray", Decimal("600.00"), "999316"),
    ]
    assert invoice.grand_total == Decimal("950.00")


def test_bill_adds_to_the_latest_open_draft_and_never_touches_a_finalized_invoice(lab: LabWorld) -> None:
    finalized = make_invoice(branch=lab.blr, patient=lab.patient, department=lab.department)
    older = make_invoice(branch=lab.blr, patient=lab.patient, department=lab.department, finalize=False)
    latest = make_invoice(branch=lab.blr, patient=lab.patient, department=lab.department, finalize=False)
    finalized_lines = list(finalized.line_items.values_list("id", "amount"))

    response = _create(lab, tests=["CBC"], bill=True)

    assert response.status_code == 201, response.content
    assert response.json()["invoice_id"] == str(latest.id)
    assert Invoice.objects.count() == 3
    codes = list(latest.line_items.order_by("position").values_list("service__code", flat=True))
    assert codes == [None, "LAB-CBC"]
    latest.refresh_from_db()
    assert latest.grand_total == Decimal("1180.00") + Decimal("350.00")
    assert older.line_items.count() == 1
    assert list(finalized.line_items.values_list("id", "amount")) == finalized_lines


def test_bill_at_another_branch_does_not_use_this_branchs_draft(lab: LabWorld) -> None:
    blr_draft = make_invoice(branch=lab.blr, patient=lab.patient, department=lab.department, finalize=False)

    order = lab.order(branch=lab.mum, doctor=lab.mum_doctor, bill=True)

    assert order.invoice is not None
    assert order.invoice.branch_id == lab.mum.id
    assert blr_draft.line_items.count() == 1


# --- refusals: 400 naming the field, nothing written


def _refused(lab: LabWorld, field: str, **changes: Any) -> dict[str, Any]:
    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    response = _create(lab, **changes)
    assert response.status_code == 400, response.content
    assert field in error_fields(response), response.json()
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    return response.json()


def test_unknown_test_is_named_by_index(lab: LabWorld) -> None:
    body = _refused(lab, "tests.1", tests=["CBC", "NOPE"])
    assert "NOPE" in body["errors"][0]["message"]


def test_duplicate_test_is_refused(lab: LabWorld) -> None:
    body = _refused(lab, "tests.1", tests=["CBC", "CBC"])
    assert "CBC" in body["errors"][0]["message"]


def test_inactive_test_is_refused(lab: LabWorld) -> None:
    lab.xray.active = False
    lab.xray.save()
    body = _refused(lab, "tests.1")
    assert "XR-CHEST" in body["errors"][0]["message"]


def test_bill_with_a_test_without_catalogue_item_is_refused(lab: LabWorld) -> None:
    make_invoice(branch=lab.blr, patient=lab.patient, department=lab.department, finalize=False)
    body = _refused(lab, "tests.1", tests=["CBC", "ESR"], bill=True)
    assert "ESR" in body["errors"][0]["message"]


def test_empty_and_too_many_tests_are_refused(lab: LabWorld) -> None:
    _refused(lab, "tests", tests=[])
    _refused(lab, "tests", tests=[f"T{n}" for n in range(21)])


def test_a_list_of_tests_far_too_long_is_refused_as_a_whole_before_its_items_are_read(lab: LabWorld) -> None:
    # DRF validated each item before the length: 150,000 bad items took seconds and answered 10 MB of errors.
    response = _create(lab, tests=[{}] * 5_000)

    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [
        {"field": "tests", "code": "max_length", "message": f"Ensure this field has no more than {MAX_TESTS} elements."}
    ]


def test_doctor_not_at_the_branch_is_refused(lab: LabWorld) -> None:
    _refused(lab, "doctor_id", doctor_id=str(lab.mum_doctor.id))


def test_unknown_doctor_is_refused(lab: LabWorld) -> None:
    _refused(lab, "doctor_id", doctor_id="00000000-0000-4000-8000-000000000000")


def test_appointment_of_another_patient_is_refused(lab: LabWorld) -> None:
    other = PatientFactory(registration_branch=lab.blr)
    appointment = AppointmentFactory(branch=lab.blr, doctor=lab.doctor, patient=other)
    _refused(lab, "appointment_id", appointment_id=str(appointment.id))


def test_appointment_at_a_hidden_branch_is_refused(lab: LabWorld) -> None:
    appointment = AppointmentFactory(branch=lab.mum, doctor=lab.mum_doctor, patient=lab.patient)
    _refused(lab, "appointment_id", appointment_id=str(appointment.id))


def test_inactive_patient_is_refused(lab: LabWorld) -> None:
    inactive = PatientFactory(registration_branch=lab.blr)
    type(inactive).objects.filter(pk=inactive.pk).update(is_active=False)
    _refused(lab, "patient_id", patient_id=inactive.patient_id)


def test_hidden_branch_and_bad_priority_are_refused(lab: LabWorld) -> None:
    _refused(lab, "branch_id", branch_id=str(lab.mum.id))
    _refused(lab, "priority", priority="asap")


def test_unknown_field_is_refused(lab: LabWorld) -> None:
    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    response = _create(lab, colour="red")
    assert response.status_code == 400
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


# --- transitions


def _post(lab: LabWorld, order: LabOrder, action: str, body: Any = None) -> Any:
    return post_json(Client(), lab.writer, f"{ORDERS}/{order.id}/{action}", body or {})


def test_collect_moves_lab_items_and_leaves_imaging_items(lab: LabWorld) -> None:
    order = lab.order([lab.cbc, lab.xray])

    response = _post(lab, order, "collect")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "collected"
    assert [item["status"] for item in body["items"]] == ["collected", "scheduled"]
    order.refresh_from_db()
    assert body["collected_at"] == order.collected_at.astimezone(lab.blr.zone).isoformat()


def test_collect_twice_is_invalid_state(lab: LabWorld) -> None:
    order = lab.order()
    assert _post(lab, order, "collect").status_code == 200
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    assert_problem(_post(lab, order, "collect"), 409, "invalid_state", current_status="collected")
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_collect_of_an_imaging_only_order_is_invalid_state(lab: LabWorld) -> None:
    order = lab.order([lab.xray])
    assert_problem(_post(lab, order, "collect"), 409, "invalid_state", current_status="ordered")
    assert LabOrder.objects.get().status == "ordered"


def test_cancel_with_reason(lab: LabWorld) -> None:
    order = lab.order([lab.cbc, lab.xray])

    response = _post(lab, order, "cancel", {"reason": "Ordered twice"})

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["cancellation_reason"]) == ("cancelled", "Ordered twice")
    assert [item["status"] for item in body["items"]] == ["cancelled", "cancelled"]
    assert body["cancelled_at"] is not None


def test_cancel_needs_a_reason(lab: LabWorld) -> None:
    order = lab.order()
    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        response = _post(lab, order, "cancel", body)
        assert response.status_code == 400, response.content
        assert error_fields(response) == ["reason"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    assert LabOrder.objects.get().status == "ordered"


def test_cancel_after_collect_and_collect_after_cancel_are_invalid_state(lab: LabWorld) -> None:
    collected, cancelled = lab.order(), lab.order()
    assert _post(lab, collected, "collect").status_code == 200
    assert _post(lab, cancelled, "cancel", {"reason": "Wrong patient"}).status_code == 200
    events = WebhookEvent.objects.count()

    assert_problem(_post(lab, collected, "cancel", {"reason": "x"}), 409, "invalid_state", current_status="collected")
    assert_problem(_post(lab, cancelled, "collect"), 409, "invalid_state", current_status="cancelled")
    assert_problem(_post(lab, cancelled, "cancel", {"reason": "x"}), 409, "invalid_state", current_status="cancelled")
    assert WebhookEvent.objects.count() == events


# --- reads


def test_retrieve_shows_the_order(lab: LabWorld) -> None:
    order = lab.order([lab.cbc, lab.xray])
    response = get(Client(), lab.reader, f"{ORDERS}/{order.id}")
    assert response.status_code == 200
    assert response.json()["order_number"] == order.order_number
    assert [i["test"]["code"] for i in response.json()["items"]] == ["CBC", "XR-CHEST"]


@pytest.mark.parametrize("action", ["", "/collect", "/cancel"])
def test_another_branchs_order_is_404(lab: LabWorld, action: str) -> None:
    order = lab.order(branch=lab.mum, doctor=lab.mum_doctor)
    client = Client()
    if action:
        response = post_json(
            client, lab.writer, f"{ORDERS}/{order.id}{action}", {"reason": "x"} if "cancel" in action else {}
        )
    else:
        response = get(client, lab.reader, f"{ORDERS}/{order.id}")
    assert_problem(response, 404, "not_found")
    assert LabOrder.objects.get(pk=order.pk).status == "ordered"


@pytest.mark.parametrize("ref", ["not-a-uuid", "00000000-0000-4000-8000-000000000000"])
def test_unknown_or_malformed_id_is_404(lab: LabWorld, ref: str) -> None:
    assert_problem(get(Client(), lab.reader, f"{ORDERS}/{ref}"), 404, "not_found")


def test_list_filters(lab: LabWorld) -> None:
    other_patient = PatientFactory(registration_branch=lab.blr)
    first = lab.order([lab.cbc])
    second = lab.order([lab.xray], priority="stat")
    third = lab.order([lab.cbc, lab.xray], patient=other_patient)
    lab.order(branch=lab.mum, doctor=lab.mum_doctor)  # hidden
    services.lab_order_collect(order=first)

    def numbers(**params: Any) -> list[str]:
        response = get(Client(), lab.reader, ORDERS, params)
        assert response.status_code == 200, response.content
        return [o["order_number"] for o in response.json()]

    assert numbers() == [third.order_number, second.order_number, first.order_number]
    assert numbers(patient_id=lab.patient.patient_id) == [second.order_number, first.order_number]
    assert numbers(status="collected") == [first.order_number]
    assert numbers(priority="stat") == [second.order_number]
    assert numbers(test="XR-CHEST") == [third.order_number, second.order_number]
    assert numbers(branch_id=str(lab.blr.id)) == [third.order_number, second.order_number, first.order_number]
    today = timezone.localtime(timezone.now(), lab.blr.zone).date()
    assert len(numbers(date_from=today.isoformat(), date_to=today.isoformat())) == 3
    assert numbers(date_from=(today + timedelta(days=1)).isoformat()) == []
    assert numbers(date_to=(today - timedelta(days=1)).isoformat()) == []


def test_a_hidden_branch_or_patient_finds_nothing_like_an_unknown_one(lab: LabWorld) -> None:
    """docs/api-rules.md §5.4: the answer does not tell an id that exists elsewhere from one that does not."""
    hidden = PatientFactory(registration_branch=lab.mum)
    for params in (
        {"branch_id": str(lab.mum.id), "patient_id": hidden.patient_id},
        {"patient_id": hidden.patient_id},
        {"patient_id": "PAT-999999"},
        {"branch_id": "00000000-0000-4000-8000-000000000009"},
    ):
        response = get(Client(), lab.reader, ORDERS, params)
        assert response.status_code == 200, (params, response.content)
        assert (response.json(), response["X-Total-Count"]) == ([], "0")
    malformed = get(Client(), lab.reader, ORDERS, {"branch_id": "MUM", "patient_id": "P" * 65})
    assert sorted(error_fields(malformed)) == ["branch_id", "patient_id"]


def _queries(url: str, token: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = Client().get(url, **bearer(token))
    assert response.status_code == 200
    return len(queries)


def test_list_and_detail_take_a_constant_number_of_queries(lab: LabWorld) -> None:
    order = lab.order([lab.cbc, lab.xray])
    one_list, one_detail = _queries(ORDERS, lab.reader), _queries(f"{ORDERS}/{order.id}", lab.reader)
    for _ in range(4):
        lab.order([lab.cbc, lab.xray, lab.unbilled])

    assert _queries(ORDERS, lab.reader) == one_list
    assert _queries(f"{ORDERS}/{order.id}", lab.reader) == one_detail
    # Pinned: the token with the client's branches, orders (a short page: no count), items, results, the audit
    # row.
    assert (one_list, one_detail) == (5, 5)


# --- authentication and scopes


def test_401_without_a_token(lab: LabWorld) -> None:
    assert Client().get(ORDERS).status_code == 401
    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    response = Client().post(ORDERS, {}, content_type="application/json")
    assert response.status_code == 401
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_403_with_the_wrong_scope(lab: LabWorld, token_for: Any) -> None:
    order = lab.order()
    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    body = {"patient_id": lab.patient.patient_id, "doctor_id": str(lab.doctor.id), "tests": ["CBC"]}
    assert_problem(post_json(Client(), lab.reader, ORDERS, body), 403, "insufficient_scope")
    assert_problem(post_json(Client(), lab.reader, f"{ORDERS}/{order.id}/collect", {}), 403, "insufficient_scope")
    assert_problem(
        post_json(Client(), lab.reader, f"{ORDERS}/{order.id}/cancel", {"reason": "x"}), 403, "insufficient_scope"
    )
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    billing_only = token_for(["billing:read"], branches=[lab.blr])
    assert_problem(get(Client(), billing_only, ORDERS), 403, "insufficient_scope")
    assert_problem(get(Client(), billing_only, f"{ORDERS}/{order.id}"), 403, "insufficient_scope")


# --- events


def test_each_change_writes_one_event_with_the_order(lab: LabWorld) -> None:
    response = _create(lab, tests=["CBC"])
    order_id = response.json()["order_id"]
    (created,) = WebhookEvent.objects.filter(type="lab_order.created")
    assert created.payload == {"order": response.json()}
    assert created.branch_ref == lab.blr.id

    collected = post_json(Client(), lab.writer, f"{ORDERS}/{order_id}/collect", {}).json()
    (event,) = WebhookEvent.objects.filter(type="lab_order.collected")
    assert event.payload == {"order": collected}

    other = lab.order()
    cancelled = post_json(Client(), lab.writer, f"{ORDERS}/{other.id}/cancel", {"reason": "Duplicate"}).json()
    (event,) = WebhookEvent.objects.filter(type="lab_order.cancelled")
    assert event.payload == {"order": cancelled}
    assert WebhookEvent.objects.count() == 4  # created x2, collected, cancelled


def test_a_refused_request_writes_no_event(lab: LabWorld) -> None:
    _create(lab, tests=["NOPE"])
    _create(lab, doctor_id=str(lab.mum_doctor.id))
    assert not WebhookEvent.objects.exists()
    assert not LineItem.objects.exists()


def test_the_detail_shows_current_results_with_their_earlier_versions(lab: LabWorld) -> None:
    hgb = AnalyteFactory(test=lab.cbc, code="HGB", name="Haemoglobin")
    order = lab.order([lab.cbc])
    item = order.items.get()
    performed = timezone.now()
    first = LabResult.objects.create(
        item=item,
        analyte=hgb,
        version=1,
        current=True,
        status="final",
        value_quantity=Decimal("9.1"),
        unit="g/dL",
        flag="L",
        performed_at=performed,
        performer="Tech A",
    )
    LabResult.objects.filter(pk=first.pk).update(current=False)
    second = LabResult.objects.create(
        item=item,
        analyte=hgb,
        version=2,
        current=True,
        status="amended",
        value_quantity=Decimal("12.5"),
        unit="g/dL",
        flag="N",
        reason="Sample mislabelled",
        performed_at=performed,
        performer="Tech A",
    )

    response = get(Client(), lab.reader, f"{ORDERS}/{order.id}")

    assert response.status_code == 200
    (shown,) = response.json()["items"][0]["results"]
    assert shown["analyte"] == {"code": "HGB", "name": "Haemoglobin"}
    assert (shown["current"]["result_id"], shown["current"]["version"]) == (str(second.id), 2)
    assert (shown["current"]["flag"], shown["current"]["reason"]) == ("N", "Sample mislabelled")
    assert [(v["result_id"], v["version"], v["status"]) for v in shown["history"]] == [(str(first.id), 1, "final")]


def test_date_filters_use_the_branch_local_day_at_its_edges_and_accept_the_extreme_dates(lab: LabWorld) -> None:
    late, early = lab.order([lab.cbc]), lab.order([lab.xray])
    # 23:30 on 10 March in Bengaluru is 18:00 UTC that day; 00:30 on 11 March is 19:00 UTC on 10 March.
    LabOrder.objects.filter(pk=late.pk).update(created_at=datetime(2026, 3, 10, 18, 0, tzinfo=UTC))
    LabOrder.objects.filter(pk=early.pk).update(created_at=datetime(2026, 3, 10, 19, 0, tzinfo=UTC))

    def numbers(**params: Any) -> list[str]:
        response = get(Client(), lab.reader, ORDERS, params)
        assert response.status_code == 200, response.content
        return [o["order_number"] for o in response.json()]

    assert numbers(date_from="2026-03-10", date_to="2026-03-10") == [late.order_number]
    assert numbers(date_from="2026-03-11", date_to="2026-03-11") == [early.order_number]
    assert numbers(date_to="2026-03-10") == [late.order_number]
    assert numbers(date_from="2026-03-11", date_to="2026-03-12") == [early.order_number]
    assert numbers(date_from="0001-01-01", date_to="9999-12-31") == [early.order_number, late.order_number]
    assert numbers(date_from="9999-12-31") == []
    assert numbers(date_to="0001-01-01") == []
