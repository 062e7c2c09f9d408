"""The billing events (docs/api-rules.md §8 and §12): `invoice.finalized`, `invoice.cancelled`,
`payment.recorded`, `credit_note.issued` and `refund.recorded` are written to the webhook outbox in the
transaction of the change, carry the API representations exactly as the API answers them (money as exact
JSON numbers), follow the branch filter, reach a real receiver signed per Standard Webhooks, and are
documented and offered like every other kind."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction

from billing import services
from billing.events import (
    CREDIT_NOTE_ISSUED,
    INVOICE_CANCELLED,
    INVOICE_FINALIZED,
    PAYMENT_RECORDED,
    REFUND_RECORDED,
)
from billing.models import Invoice
from integrations import tasks
from integrations.webhooks.admin import WebhookSubscriptionForm
from integrations.webhooks.models import WebhookDelivery, WebhookEvent
from integrations.webhooks.registry import PayloadPart, event_kind_get, event_kinds
from tests.billing.factories import INVOICES, body, get, line, make_invoice, pay, post_json
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, error_fields, row_counts
from tests.integrations.webhook_receiver import fake_dns, receiver, subscribe, verify

pytestmark = pytest.mark.django_db
__all__ = ["fake_dns", "receiver"]

D = Decimal
URL = "https://hooks.example.com/billing"
KINDS = [INVOICE_FINALIZED, INVOICE_CANCELLED, PAYMENT_RECORDED, CREDIT_NOTE_ISSUED, REFUND_RECORDED]
# What each kind's `data` holds besides the invoice detail, and the schema of each part.
DOCUMENT = {PAYMENT_RECORDED: "payment", CREDIT_NOTE_ISSUED: "credit_note", REFUND_RECORDED: "refund"}
SCHEMAS = {"invoice": "InvoiceDetail", "payment": "Payment", "credit_note": "CreditNote", "refund": "Refund"}
# A decimal written as a JSON string ("1180.00"): money must never be one.
QUOTED_DECIMAL = re.compile(rb'"[a-z_]+":"-?[0-9]+\.[0-9]+"')


@pytest.fixture(autouse=True)
def public_dns(fake_dns):
    return fake_dns


@pytest.fixture
def token(blr, token_for):
    return token_for(["billing:write", "billing:read"], branches=[blr])


@pytest.fixture
def queued(monkeypatch):
    """Every deliver task queued after commit (delivery id, claim token), instead of sent to the broker."""
    calls: list[tuple[int, str | None]] = []
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda args, **options: calls.append(tuple(args)))
    return calls


def events(event_type: str | None = None) -> list[WebhookEvent]:
    rows = WebhookEvent.objects.order_by("created_at", "id")
    return list(rows.filter(type=event_type) if event_type else rows)


def data(event: WebhookEvent) -> dict[str, Any]:
    """The `data` of the body every delivery of the event sends, money read as Decimal."""
    return json.loads(event.body(), parse_float=Decimal)["data"]


def detail(client, token, invoice_id: Any) -> dict[str, Any]:
    response = get(client, token, f"{INVOICES}/{invoice_id}")
    assert response.status_code == 200, response.content
    return body(response)


def prepare(kind: str, *, branch: Any, patient: Any, department: Any) -> Callable[[], Any]:
    """An invoice ready for the change that publishes `kind` (grand total 1180.00), and that change."""
    invoice = make_invoice(branch=branch, patient=patient, department=department, finalize=kind != INVOICE_FINALIZED)
    if kind == INVOICE_FINALIZED:
        return lambda: services.invoice_finalize(invoice=invoice)
    if kind == INVOICE_CANCELLED:
        return lambda: services.invoice_cancel(invoice=invoice, reason="Billed twice")
    if kind == PAYMENT_RECORDED:
        return lambda: pay(invoice, "180.50", mode="upi", reference="UPI-1")
    if kind == CREDIT_NOTE_ISSUED:
        line_id = invoice.line_items.get().id
        return lambda: services.credit_note_issue(
            invoice=invoice, reason="Not rendered", lines=[services.CreditLineInput(line_id=line_id)]
        )
    pay(invoice, "1180.00")
    return lambda: services.refund_record(invoice=invoice, amount=D("100.00"), payment_mode="cash")


# --- One event per change, in its transaction ------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_each_change_writes_one_event_of_its_kind_and_one_delivery_per_matching_subscription(
    kind, client, token, blr, mum, patient, medicine
):
    everything, _ = subscribe(URL, KINDS, name="everything")
    here, _ = subscribe(URL, [kind], name="here", branch_ids=[blr.pk])
    subscribe(URL, [kind], name="elsewhere", branch_ids=[mum.pk])
    subscribe(URL, [other for other in KINDS if other != kind], name="the other kinds")
    subscribe(URL, ["appointment.booked", "patient.registered"], name="other domains")
    subscribe(URL, [kind], name="inactive", is_active=False)
    change = prepare(kind, branch=blr, patient=patient, department=medicine)
    before = {event.id for event in events()}

    change()

    (event,) = [event for event in events() if event.id not in before]
    assert (event.type, event.branch_ref, event.is_test) == (kind, blr.pk, False)
    assert set(event.payload) == {"invoice", *([DOCUMENT[kind]] if kind in DOCUMENT else [])}
    (invoice,) = Invoice.objects.all()
    assert data(event)["invoice"] == detail(client, token, invoice.id)
    deliveries = WebhookDelivery.objects.filter(event=event)
    assert {d.subscription_id for d in deliveries} == {everything.pk, here.pk}
    assert {(d.status, d.attempt_count) for d in deliveries} == {("pending", 0)}


@pytest.mark.parametrize("kind", KINDS)
def test_a_change_that_rolls_back_publishes_nothing_and_queues_nothing(kind, blr, patient, medicine, queued):
    subscribe(URL, KINDS)
    change = prepare(kind, branch=blr, patient=patient, department=medicine)
    before = row_counts()
    published = len(events(kind))
    written = []

    def change_then_fail() -> None:
        with transaction.atomic():
            change()
            written.append(len(events(kind)) - published)  # written with the change, in its transaction
            raise RuntimeError("the surrounding change fails")

    with pytest.raises(RuntimeError, match="the surrounding change fails"):
        change_then_fail()

    assert written == [1]
    assert len(events(kind)) == published
    assert row_counts() == before
    assert queued == []


def test_the_delivery_task_is_queued_only_after_the_change_commits(
    blr, patient, medicine, queued, django_capture_on_commit_callbacks
):
    subscribe(URL, [PAYMENT_RECORDED])
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)

    with django_capture_on_commit_callbacks(execute=True):
        pay(invoice, "100.00")
        assert queued == []

    assert queued == [(WebhookDelivery.objects.get().pk, None)]


# --- Refused requests publish nothing ---------------------------------------------------------------------


def test_refused_requests_publish_nothing(client, token, blr, patient, medicine):
    subscribe(URL, KINDS)
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    pay(invoice, "100.00", mode="upi", reference="UPI-1")
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    line_id = str(invoice.line_items.get().id)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    published = [(event.id, event.type) for event in events()]

    overcredit = post_json(
        client,
        token,
        f"{INVOICES}/{invoice.id}/credit-notes",
        {"reason": "Too much", "lines": [{"line_id": line_id, "amount": D("1000.01")}]},
    )
    draft_credit = post_json(
        client,
        token,
        f"{INVOICES}/{draft.id}/credit-notes",
        {"reason": "Not issued yet", "lines": [{"line_id": str(draft.line_items.get().id)}]},
    )
    duplicate = post_json(
        client,
        token,
        f"{INVOICES}/{invoice.id}/payments",
        {"amount": D("50.00"), "payment_mode": "upi", "reference": "UPI-1"},
    )
    overrefund = post_json(
        client, token, f"{INVOICES}/{invoice.id}/refunds", {"amount": D("100.01"), "payment_mode": "cash"}
    )
    cancel_paid = post_json(client, token, f"{INVOICES}/{invoice.id}/cancel", {"reason": "Too late"})
    finalize_again = post_json(client, token, f"{INVOICES}/{invoice.id}/finalize", {})

    assert error_fields(overcredit) == ["lines.0.amount"]
    assert_problem(draft_credit, 409, "invalid_state", current_status="draft")
    assert_problem(duplicate, 409, "duplicate_payment", payment_mode="upi", reference="UPI-1")
    assert error_fields(overrefund) == ["amount"]
    assert_problem(cancel_paid, 409, "invalid_state", current_status="partially_paid")
    assert_problem(finalize_again, 409, "invalid_state", current_status="partially_paid")
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    assert [(event.id, event.type) for event in events()] == published


# --- The payload is what the API answers ------------------------------------------------------------------


def test_invoice_finalized_carries_the_detail_the_api_answers(client, token, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)

    response = post_json(client, token, f"{INVOICES}/{draft.id}/finalize", {})

    assert response.status_code == 200, response.content
    (event,) = events()
    assert event.type == INVOICE_FINALIZED
    assert data(event) == {"invoice": detail(client, token, draft.id)} == {"invoice": body(response)}
    assert data(event)["invoice"]["invoice_number"].startswith("BLR/")


def test_invoice_cancelled_carries_the_detail_the_api_answers(client, token, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)

    response = post_json(client, token, f"{INVOICES}/{invoice.id}/cancel", {"reason": "Billed twice"})

    assert response.status_code == 200, response.content
    event = events(INVOICE_CANCELLED)[0]
    assert data(event) == {"invoice": detail(client, token, invoice.id)} == {"invoice": body(response)}
    assert data(event)["invoice"]["status"] == "cancelled"


def test_payment_recorded_carries_the_payment_of_the_201_and_the_detail_after(client, token, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)

    response = post_json(
        client,
        token,
        f"{INVOICES}/{invoice.id}/payments",
        {"amount": D("180.50"), "payment_mode": "card", "reference": "CARD-7"},
    )

    assert response.status_code == 201, response.content
    created = body(response)
    (event,) = events(PAYMENT_RECORDED)
    assert data(event) == {"payment": created["payment"], "invoice": detail(client, token, invoice.id)}
    assert data(event)["invoice"].items() >= created["invoice"].items()
    assert data(event)["invoice"]["payments"] == [created["payment"]]
    assert (data(event)["payment"]["amount"], data(event)["invoice"]["balance"]) == (D("180.50"), D("999.50"))


def test_credit_note_issued_carries_the_note_of_the_201_and_the_detail_after(client, token, blr, patient, medicine):
    invoice = make_invoice(
        branch=blr, patient=patient, lines=[line(medicine, quantity="2", rate="500.00"), line(medicine, "300.00")]
    )
    first, _ = invoice.line_items.order_by("position")

    response = post_json(
        client,
        token,
        f"{INVOICES}/{invoice.id}/credit-notes",
        {"reason": "One session not given", "lines": [{"line_id": str(first.id), "quantity": 1}]},
    )

    assert response.status_code == 201, response.content
    created = body(response)
    (event,) = events(CREDIT_NOTE_ISSUED)
    assert data(event) == {"credit_note": created["credit_note"], "invoice": detail(client, token, invoice.id)}
    assert data(event)["invoice"].items() >= created["invoice"].items()
    note = get(client, token, response["Location"])
    assert data(event)["credit_note"] == body(note) == data(event)["invoice"]["credit_notes"][0]
    assert data(event)["credit_note"]["credit_note_number"].startswith("BLR/CN/")
    assert (data(event)["credit_note"]["totals"]["total"], data(event)["invoice"]["credited"]) == (
        D("590.00"),
        D("590.00"),
    )


def test_refund_recorded_carries_the_refund_of_the_201_and_the_detail_after(client, token, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    pay(invoice, "1180.00")
    services.credit_note_issue(
        invoice=invoice, reason="Not rendered", lines=[services.CreditLineInput(line_id=invoice.line_items.get().id)]
    )

    response = post_json(
        client,
        token,
        f"{INVOICES}/{invoice.id}/refunds",
        {"amount": D("1180.00"), "payment_mode": "neft", "reference": "NEFT-99"},
    )

    assert response.status_code == 201, response.content
    created = body(response)
    (event,) = events(REFUND_RECORDED)
    assert data(event) == {"refund": created["refund"], "invoice": detail(client, token, invoice.id)}
    assert data(event)["invoice"].items() >= created["invoice"].items()
    assert data(event)["invoice"]["refunds"] == [created["refund"]]
    assert (data(event)["invoice"]["refund_due"], data(event)["invoice"]["refunded"]) == (D("0.00"), D("1180.00"))


# --- Money is an exact JSON number -------------------------------------------------------------------------


def test_money_leaves_as_exact_json_numbers_never_strings(blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, lines=[line(medicine, rate="999.99")])  # 1179.99
    pay(invoice, "0.10")
    services.credit_note_issue(
        invoice=invoice,
        reason="Goodwill",
        lines=[services.CreditLineInput(line_id=invoice.line_items.get().id, amount=D("0.50"))],
    )
    services.refund_record(invoice=invoice, amount=D("0.05"), payment_mode="cash")
    bodies = {event.type: event.body() for event in events()}

    assert set(bodies) == {INVOICE_FINALIZED, PAYMENT_RECORDED, CREDIT_NOTE_ISSUED, REFUND_RECORDED}
    for sent in bodies.values():
        assert b'"grand_total":1179.99' in sent
        assert b'"rate":999.99' in sent
        assert QUOTED_DECIMAL.findall(sent) == []
    assert b'"payment":{"id":' in bodies[PAYMENT_RECORDED]
    assert b'"amount":0.10,' in bodies[PAYMENT_RECORDED]
    assert b'"paid":0.10,' in bodies[PAYMENT_RECORDED]
    assert b'"total":0.59' in bodies[CREDIT_NOTE_ISSUED]  # 0.50 and 18 % GST on it
    assert b'"amount":0.05,' in bodies[REFUND_RECORDED]
    assert b'"balance":1179.35,' in bodies[REFUND_RECORDED]  # 1179.99 - 0.59 - (0.10 - 0.05)


# --- Delivery end to end ------------------------------------------------------------------------------------


def test_all_five_reach_a_real_receiver_signed_with_their_payloads(
    client, token, blr, patient, medicine, receiver, queued, django_capture_on_commit_callbacks
):
    subscription, secret = subscribe(receiver.url(), KINDS)
    lines = [{"service_name": "Consultation", "department": "General Medicine", "rate": 1000, "tax_rate": 18}]
    new_invoice = {"patient_id": patient.patient_id, "line_items": lines, "finalize": True}

    with django_capture_on_commit_callbacks(execute=True):
        created = post_json(client, token, INVOICES, new_invoice)
        invoice = f"{INVOICES}/{created.json()['id']}"
        line_id = created.json()["line_items"][0]["id"]
        responses = [
            created,
            post_json(client, token, f"{invoice}/payments", {"amount": D("1180.00"), "payment_mode": "cash"}),
            post_json(
                client, token, f"{invoice}/credit-notes", {"reason": "Not rendered", "lines": [{"line_id": line_id}]}
            ),
            post_json(client, token, f"{invoice}/refunds", {"amount": D("1180.00"), "payment_mode": "cash"}),
        ]
        other = post_json(client, token, INVOICES, new_invoice)
        responses += [other, post_json(client, token, f"{INVOICES}/{other.json()['id']}/cancel", {"reason": "Twice"})]
    assert [response.status_code for response in responses] == [201, 201, 201, 201, 201, 200]
    assert len(queued) == 6
    assert [tasks.deliver_webhook(*task_args) for task_args in queued] == ["succeeded"] * 6  # the worker's task

    received = receiver.wait_for(6)
    published = {str(event.id): event for event in events()}
    assert [published[request.webhook_id].type for request in received] == [  # in the order of the changes
        INVOICE_FINALIZED,
        PAYMENT_RECORDED,
        CREDIT_NOTE_ISSUED,
        REFUND_RECORDED,
        INVOICE_FINALIZED,
        INVOICE_CANCELLED,
    ]
    for request in received:
        event = published[request.webhook_id]
        verify(request, secret)  # standardwebhooks.Webhook(secret).verify(body, headers)
        assert json.loads(request.body, parse_float=Decimal) == {
            "id": str(event.id),
            "type": event.type,
            "timestamp": event.created_at.isoformat(),
            "data": data(event),
        }
        assert b'"grand_total":1180.00' in request.body
        assert QUOTED_DECIMAL.findall(request.body) == []
    last = json.loads(received[3].body, parse_float=Decimal)["data"]
    assert last["invoice"] == detail(client, token, created.json()["id"])
    assert (last["refund"]["amount"], last["invoice"]["credited"], last["invoice"]["refund_due"]) == (
        D("1180.00"),
        D("1180.00"),
        D("0.00"),
    )
    assert {(d.subscription_id, d.status, d.last_status_code) for d in WebhookDelivery.objects.all()} == {
        (subscription.pk, "succeeded", 200)
    }


# --- The branch filter -------------------------------------------------------------------------------------


def test_a_subscription_limited_to_a_branch_receives_only_that_branchs_invoices(blr, mum, patient, medicine):
    mumbai, _ = subscribe(URL, KINDS, name="Mumbai", branch_ids=[mum.pk])
    bengaluru, _ = subscribe(URL, KINDS, name="Bengaluru", branch_ids=[blr.pk])
    for kind in KINDS:
        prepare(kind, branch=blr, patient=patient, department=medicine)()

    assert {event.branch_ref for event in events()} == {blr.pk}
    assert not WebhookDelivery.objects.filter(subscription=mumbai).exists()
    delivered = WebhookDelivery.objects.filter(subscription=bengaluru)
    assert sorted(delivered.values_list("event__type", flat=True)) == sorted(
        # prepare() finalizes (and for the refund pays) the invoices it makes
        [*KINDS, INVOICE_FINALIZED, INVOICE_FINALIZED, INVOICE_FINALIZED, INVOICE_FINALIZED, PAYMENT_RECORDED]
    )

    make_invoice(branch=mum, patient=patient, department=medicine)

    (mumbai_delivery,) = WebhookDelivery.objects.filter(subscription=mumbai)
    assert (mumbai_delivery.event.type, mumbai_delivery.event.branch_ref) == (INVOICE_FINALIZED, mum.pk)
    assert delivered.count() == 10


# --- Declared like every kind: registry, OpenAPI document, subscription form ------------------------------


def test_the_five_kinds_are_registered_with_their_payload_parts():
    for name in KINDS:
        kind = event_kind_get(name)
        expected = [PayloadPart(DOCUMENT[name], SCHEMAS[DOCUMENT[name]])] if name in DOCUMENT else []
        assert [PayloadPart(part.key, part.component) for part in kind.payload] == [
            *expected,
            PayloadPart("invoice", "InvoiceDetail"),
        ]
        assert not kind.notifies


def test_the_openapi_document_lists_the_five_with_their_payloads(client):
    response = client.get("/api/v1/schema", {"format": "json"})

    assert response.status_code == 200
    schema = json.loads(response.content)
    assert set(SCHEMAS.values()) <= set(schema["components"]["schemas"])
    for name in KINDS:
        envelope = schema["webhooks"][name]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert envelope["properties"]["type"]["enum"] == [name]
        payload = envelope["properties"]["data"]
        keys = [DOCUMENT[name], "invoice"] if name in DOCUMENT else ["invoice"]
        assert (payload["type"], payload["required"], list(payload["properties"])) == ("object", keys, keys)
        assert {key: payload["properties"][key]["$ref"] for key in keys} == {
            key: f"#/components/schemas/{SCHEMAS[key]}" for key in keys
        }


def test_the_subscription_form_and_page_offer_the_five(admin_client):
    choices = dict(WebhookSubscriptionForm().fields["event_types"].choices)
    assert choices[INVOICE_FINALIZED] == (
        "invoice.finalized: An invoice was finalized: numbered, and from now on a record of account."
    )
    assert choices[CREDIT_NOTE_ISSUED] == "credit_note.issued: A credit note was issued against an invoice."
    assert choices[REFUND_RECORDED] == "refund.recorded: Money was paid back to the patient on an invoice."
    assert list(choices) == [kind.name for kind in event_kinds()]
    assert set(KINDS) <= set(choices)

    page = admin_client.get("/admin/integrations/webhooksubscription/add/").content.decode()
    for name in KINDS:
        assert f'name="event_types" value="{name}"' in page
