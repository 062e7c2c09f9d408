"""GET /api/v1/billing/summary: the SQL aggregation equals an independent Python computation over a few
hundred generated invoices, for several ranges and branches; parameters and branch restriction."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from billing import selectors, services
from billing.models import CreditNote, Invoice, LineItem, Payment, Refund
from tests.billing.factories import SUMMARY, body, get, line, make_invoice, pay
from tests.factories import ApiClientFactory, BranchFactory, DepartmentFactory
from tests.helpers import error_fields
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

D = Decimal
ZERO = D("0.00")
MODES = ["cash", "card", "upi", "neft", "cheque", "online", "insurance"]
START = date(2026, 2, 1)


def generate(rng: random.Random, branches: list[Any], count: int) -> None:
    """`count` invoices over February-June 2026 in every status, with 1-4 lines and 0-3 payments each."""
    departments = [DepartmentFactory(name=name) for name in ("Cardiology", "Dermatology", "Paediatrics", "Radiology")]
    patients = [
        PatientFactory(registration_branch=rng.choice(branches), address_state=state)
        for state in ("Karnataka", "Maharashtra", "Kerala", "", "Karnataka", "Maharashtra")
    ]
    for n in range(count):
        branch = branches[n % len(branches)]
        lines = []
        for _ in range(rng.randint(1, 4)):
            quantity = rng.choice(["1", "2", "0.5", "1.25", "3"])
            rate = f"{rng.randint(50, 5000)}.{rng.randint(0, 99):02d}"
            gross = (D(quantity) * D(rate)).quantize(D("0.01"))
            discount = rng.choice([ZERO, ZERO, (gross * D("0.1")).quantize(D("0.01"))])
            tax_rate = rng.choice(["0", "5", "12", "18"])
            lines.append(
                line(rng.choice(departments), rate=rate, tax_rate=tax_rate, quantity=quantity, discount=str(discount))
            )
        on = START + timedelta(days=rng.randint(0, 120))
        invoice = make_invoice(
            branch=branch, patient=rng.choice(patients), lines=lines, finalize=rng.random() < 0.85, on=on
        )
        if rng.random() < 0.08:
            services.invoice_cancel(invoice=invoice, reason="generated")
            continue
        if invoice.status != "finalized":
            continue
        for k in range(rng.choice([0, 0, 1, 1, 2, 3])):
            balance = Invoice.objects.get(pk=invoice.pk).balance
            if balance <= 0:
                break
            full = rng.random() < 0.3
            amount = balance if full else max(D("0.01"), (balance * D(rng.randint(5, 60)) / 100).quantize(D("0.01")))
            mode = rng.choice(MODES)
            paid_on = on + timedelta(days=rng.randint(0, 40))
            pay(invoice, str(amount), mode=mode, reference="" if mode == "cash" else f"R{n}-{k}", on=paid_on)
        # Some are credited (dated today, as every credit note is) and what is owed back refunded, in part.
        if rng.random() < 0.15:
            first = invoice.line_items.order_by("position").first()
            services.credit_note_issue(
                invoice=invoice, reason="generated", lines=[services.CreditLineInput(line_id=first.id)]
            )
            credited = Invoice.objects.get(pk=invoice.pk)
            if credited.refund_due > 0 and rng.random() < 0.7:
                refund = credited.refund_due if rng.random() < 0.6 else (credited.refund_due / 2).quantize(D("0.01"))
                services.refund_record(invoice=credited, amount=max(refund, D("0.01")), payment_mode="cash")


def expected(date_from: date, date_to: date, branch_ids: set[Any] | None) -> dict[str, Any]:
    """The summary computed in Python from stored rows, one invoice at a time."""
    billed_statuses = {"finalized", "partially_paid", "paid"}
    total_billed = total_outstanding = ZERO
    billed_ids = set()
    for invoice in Invoice.objects.all():
        if branch_ids is not None and invoice.branch_id not in branch_ids:
            continue
        if invoice.status in billed_statuses and date_from <= invoice.date <= date_to:
            billed_ids.add(invoice.id)
            total_billed += invoice.grand_total
            # What is left to collect, never negative: max(0, grand total - credited - (paid - refunded)).
            total_outstanding += max(ZERO, invoice.grand_total - invoice.credited - invoice.paid + invoice.refunded)
    by_mode = dict.fromkeys(MODES, ZERO)
    for payment in Payment.objects.select_related("invoice"):
        if branch_ids is not None and payment.invoice.branch_id not in branch_ids:
            continue
        if date_from <= payment.payment_date <= date_to:
            by_mode[payment.payment_mode] += payment.amount
    credited = refunded = ZERO
    for note in CreditNote.objects.select_related("invoice"):
        if (branch_ids is None or note.invoice.branch_id in branch_ids) and date_from <= note.date <= date_to:
            credited += note.total
    for refund in Refund.objects.select_related("invoice"):
        if (
            branch_ids is None or refund.invoice.branch_id in branch_ids
        ) and date_from <= refund.refund_date <= date_to:
            refunded += refund.amount
    revenue: dict[str, Decimal] = defaultdict(lambda: ZERO)
    for item in LineItem.objects.select_related("department"):
        if item.invoice_id in billed_ids:
            revenue[item.department.name] += item.taxable_amount
    return {
        "total_billed": total_billed,
        "total_collected": sum(by_mode.values(), ZERO),
        "total_outstanding": total_outstanding,
        "total_credited": credited,
        "total_refunded": refunded,
        "collection_by_mode": by_mode,
        "revenue_by_department": dict(sorted(revenue.items())),
    }


@pytest.fixture
def population(blr, mum):
    delhi = BranchFactory(code="DEL", state="Delhi")
    generate(random.Random(5), [blr, mum, delhi], 300)
    return [blr, mum, delhi]


RANGES = [
    (date(2026, 2, 1), date(2026, 6, 30)),
    (date(2026, 3, 1), date(2026, 3, 31)),
    (date(2026, 3, 31), date(2026, 4, 1)),
    (date(2026, 4, 15), date(2026, 4, 15)),
    (date(2026, 1, 1), date(2026, 1, 31)),
    (START, timezone.localdate()),  # the credit notes and refunds, all dated today
]


def test_the_summary_equals_a_python_computation_for_several_ranges_and_branches(client, token_for, population):
    everything = ApiClientFactory(allowed_scopes=["billing:read"])
    blr, mum, delhi = population
    two_branches = ApiClientFactory(allowed_scopes=["billing:read"], branches=[blr, delhi])
    assert Invoice.objects.count() == 300
    assert set(Invoice.objects.values_list("status", flat=True)) == {
        "draft",
        "finalized",
        "partially_paid",
        "paid",
        "cancelled",
    }

    checked = 0
    for date_from, date_to in RANGES:
        cases = [
            (everything, None, None),
            (everything, blr.id, {blr.id}),
            (everything, mum.id, {mum.id}),
            (two_branches, None, {blr.id, delhi.id}),
            (two_branches, delhi.id, {delhi.id}),
        ]
        for api_client, branch_id, branch_ids in cases:
            summary = selectors.billing_summary(
                client=api_client, date_from=date_from, date_to=date_to, branch_id=branch_id
            )
            assert summary == expected(date_from, date_to, branch_ids), (date_from, date_to, branch_ids)
            checked += 1
    full = selectors.billing_summary(client=everything, date_from=RANGES[0][0], date_to=RANGES[0][1])
    assert full["total_billed"] > 0
    assert full["total_collected"] > 0
    assert len(full["revenue_by_department"]) == 4
    assert checked == 30
    today = selectors.billing_summary(client=everything, date_from=START, date_to=timezone.localdate())
    assert today["total_credited"] > today["total_refunded"] > 0

    # The same through the API, as exact JSON numbers in the specification's field order.
    params = {"date_from": "2026-03-01", "date_to": "2026-04-30", "branch_id": str(blr.id)}
    response = get(client, token_for(["billing:read"]), SUMMARY, params)
    assert response.status_code == 200, response.content
    assert body(response) == expected(date(2026, 3, 1), date(2026, 4, 30), {blr.id})
    assert list(body(response)) == [
        "total_billed",
        "total_collected",
        "total_outstanding",
        "total_credited",
        "total_refunded",
        "collection_by_mode",
        "revenue_by_department",
    ]


def test_a_small_summary_exactly(client, reader, blr, mum, patient, medicine, ortho):
    first = make_invoice(
        branch=blr,
        patient=patient,
        lines=[line(medicine), line(ortho, rate="200.00", tax_rate="5")],
        on=date(2026, 10, 5),
    )
    pay(first, "1000.00", mode="upi", reference="U1", on=date(2026, 10, 6))
    pay(first, "100.00", on=date(2026, 11, 1))  # outside the range: not collected in October
    second = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 31))
    pay(second, "1180.00", mode="card", reference="C1", on=date(2026, 10, 31))
    make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 10, 10))  # draft
    cancelled = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 11))
    services.invoice_cancel(invoice=cancelled, reason="duplicate")
    make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 9, 30))  # before the range
    make_invoice(branch=mum, patient=PatientFactory(registration_branch=mum), department=medicine, on=date(2026, 10, 5))

    response = get(client, reader, SUMMARY, {"date_from": "2026-10-01", "date_to": "2026-10-31"})

    assert response.status_code == 200, response.content
    assert body(response) == {
        "total_billed": D("2570.00"),  # 1180 + 210 and 1180
        "total_collected": D("2180.00"),
        "total_outstanding": D("290.00"),  # 1390 - 1100 paid so far, whenever paid
        "total_credited": D("0.00"),
        "total_refunded": D("0.00"),
        "collection_by_mode": {
            "cash": D("0.00"),
            "card": D("1180.00"),
            "upi": D("1000.00"),
            "neft": D("0.00"),
            "cheque": D("0.00"),
            "online": D("0.00"),
            "insurance": D("0.00"),
        },
        "revenue_by_department": {"General Medicine": D("2000.00"), "Orthopaedics": D("200.00")},
    }


def test_an_empty_range_has_zeros_and_every_mode(client, reader):
    response = get(client, reader, SUMMARY, {"date_from": "2020-01-01", "date_to": "2020-12-31"})

    assert body(response) == {
        "total_billed": D("0.00"),
        "total_collected": D("0.00"),
        "total_outstanding": D("0.00"),
        "total_credited": D("0.00"),
        "total_refunded": D("0.00"),
        "collection_by_mode": dict.fromkeys(MODES, D("0.00")),
        "revenue_by_department": {},
    }


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({}, ["date_from", "date_to"]),
        ({"date_from": "2026-10-01"}, ["date_to"]),
        ({"date_to": "2026-10-01"}, ["date_from"]),
        ({"date_from": "2026-10-02", "date_to": "2026-10-01"}, ["date_to"]),
        ({"date_from": "01/10/2026", "date_to": "2026-10-31"}, ["date_from"]),
        ({"date_from": "2026-10-01", "date_to": "2026-10-31", "branch_id": "x"}, ["branch_id"]),
    ],
)
def test_bad_summary_parameters_are_400_naming_them(client, reader, params, fields):
    assert sorted(error_fields(get(client, reader, SUMMARY, params))) == fields


def test_a_branch_the_client_may_not_see_is_a_400(client, reader, mum):
    params = {"date_from": "2026-10-01", "date_to": "2026-10-31", "branch_id": str(mum.id)}

    assert error_fields(get(client, reader, SUMMARY, params)) == ["branch_id"]
    assert sorted(error_fields(get(client, reader, SUMMARY, {"branch_id": str(mum.id)}))) == [
        "branch_id",
        "date_from",
        "date_to",
    ]


def test_the_selector_refuses_a_branch_outside_the_clients_restriction(blr, mum):
    from clinic.errors import FieldError

    restricted = ApiClientFactory(allowed_scopes=["billing:read"], branches=[blr])

    with pytest.raises(FieldError):
        selectors.billing_summary(
            client=restricted, date_from=date(2026, 1, 1), date_to=date(2026, 1, 31), branch_id=mum.id
        )


def test_a_restricted_client_summarises_only_its_branches(client, reader, blr, mum, patient, medicine):
    make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 5))
    make_invoice(branch=mum, patient=PatientFactory(registration_branch=mum), department=medicine, on=date(2026, 10, 5))

    response = get(client, reader, SUMMARY, {"date_from": "2026-10-01", "date_to": "2026-10-31"})

    assert body(response)["total_billed"] == D("1180.00")


def test_the_summary_is_one_statement_after_the_clients_branches_whatever_the_volume(
    blr, patient, medicine, django_assert_num_queries
):
    api_client = ApiClientFactory(allowed_scopes=["billing:read"])
    for n in range(10):
        invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 1 + n))
        pay(invoice, "10.00", on=date(2026, 10, 1 + n))

    # The client's branches; then billed totals, credits, refunds, payments by mode and lines by department
    # with the departments' names, in one statement.
    with django_assert_num_queries(2):
        selectors.billing_summary(client=api_client, date_from=date(2026, 10, 1), date_to=date(2026, 10, 31))


def test_every_figure_keeps_two_places_empty_or_not(blr, patient, medicine):
    """Money renders as exact numbers with two places (0.00, not 0): the sums, the empty sums and the grouped
    ones alike, for an unrestricted and for a branch-restricted client."""
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 3))
    pay(invoice, "10.50", on=date(2026, 10, 3))
    everything = ApiClientFactory(allowed_scopes=["billing:read"])
    restricted = ApiClientFactory(allowed_scopes=["billing:read"], branches=[blr])
    for api_client in (everything, restricted):
        for date_from, date_to in ((date(2026, 10, 1), date(2026, 10, 31)), (date(2020, 1, 1), date(2020, 1, 2))):
            summary = selectors.billing_summary(client=api_client, date_from=date_from, date_to=date_to)
            figures = [value for key, value in summary.items() if isinstance(value, Decimal)]
            figures += [*summary["collection_by_mode"].values(), *summary["revenue_by_department"].values()]
            assert len(figures) >= 9
            assert {figure.as_tuple().exponent for figure in figures} == {-2}, summary
