"""Lab orders under concurrency, with real threads on their own PostgreSQL connections: order and accession
numbers stay consecutive per branch without gaps or repeats, also when some ordering transactions roll back;
an order is collected or cancelled, never both."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from billing.models import Invoice
from lab.models import AccessionCounter, LabOrder, LabOrderCounter, LabOrderItem
from tests.billing.factories import make_invoice, post_json
from tests.helpers import all_at_once
from tests.lab.order_factories import ORDERS, LabWorld, make_lab_world

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 20


class Rollback(Exception):
    """Raised inside an ordering transaction to force it to roll back after it took its numbers."""


@pytest.fixture
def lab(token_for: Any) -> LabWorld:
    return make_lab_world(token_for)


def _api_post(token: str, url: str, payload: dict[str, Any]) -> Callable[[], tuple[int, dict[str, Any]]]:
    def call() -> tuple[int, dict[str, Any]]:
        response = post_json(Client(), token, url, payload)
        return response.status_code, response.json()

    return call


def _year() -> int:
    return timezone.localtime(timezone.now()).year


def test_20_concurrent_orders_take_consecutive_order_and_accession_numbers(lab: LabWorld) -> None:
    body = {"patient_id": lab.patient.patient_id, "doctor_id": str(lab.doctor.id), "tests": ["CBC", "XR-CHEST"]}

    results = all_at_once([_api_post(lab.writer, ORDERS, body)] * THREADS)

    assert [status for status, _ in results] == [201] * THREADS, results
    year, yy = _year(), _year() % 100
    numbers = sorted(LabOrder.objects.values_list("order_number", flat=True))
    assert numbers == [f"BLR-LAB-{year}-{n:06d}" for n in range(1, THREADS + 1)]
    accessions = sorted(LabOrderItem.objects.values_list("accession_number", flat=True))
    assert accessions == [f"BLR-{yy:02d}-{n:07d}" for n in range(1, 2 * THREADS + 1)]
    # The order counter is held until commit, so order n took accession numbers 2n-1 and 2n.
    for order in LabOrder.objects.prefetch_related("items"):
        n = int(order.order_number.rsplit("-", 1)[1])
        taken = sorted(item.accession_number for item in order.items.all())
        assert taken == [f"BLR-{yy:02d}-{2 * n - 1:07d}", f"BLR-{yy:02d}-{2 * n:07d}"]
    assert LabOrderCounter.objects.get(branch=lab.blr, year=year).last_number == THREADS
    assert AccessionCounter.objects.get(branch=lab.blr, year=year).last_number == 2 * THREADS


def test_a_rolled_back_order_gives_its_numbers_back(lab: LabWorld) -> None:
    def place_and_roll_back() -> None:
        with transaction.atomic():
            lab.order([lab.cbc, lab.xray])
            raise Rollback

    with pytest.raises(Rollback):
        place_and_roll_back()

    order = lab.order([lab.cbc])

    assert order.order_number == f"BLR-LAB-{_year()}-000001"
    assert order.items.get().accession_number == f"BLR-{_year() % 100:02d}-0000001"


def test_orders_that_roll_back_concurrently_leave_no_gap(lab: LabWorld) -> None:
    def place(rollback: bool) -> Callable[[], str]:
        def call() -> str:
            with transaction.atomic():
                order = lab.order([lab.cbc])
                if rollback:
                    raise Rollback
            return order.order_number

        return call

    results = all_at_once([place(rollback=n % 2 == 0) for n in range(THREADS)])

    assert sum(isinstance(r, Rollback) for r in results) == THREADS // 2
    year, yy = _year(), _year() % 100
    kept = THREADS // 2
    assert sorted(LabOrder.objects.values_list("order_number", flat=True)) == [
        f"BLR-LAB-{year}-{n:06d}" for n in range(1, kept + 1)
    ]
    assert sorted(LabOrderItem.objects.values_list("accession_number", flat=True)) == [
        f"BLR-{yy:02d}-{n:07d}" for n in range(1, kept + 1)
    ]


def test_an_order_raced_by_collect_and_cancel_ends_in_exactly_one_of_them(lab: LabWorld) -> None:
    order = lab.order([lab.cbc])
    base = f"{ORDERS}/{order.id}"
    work = [_api_post(lab.writer, f"{base}/collect", {}), _api_post(lab.writer, f"{base}/cancel", {"reason": "x"})] * 5

    results = all_at_once(work)

    assert sorted(status for status, _ in results) == [200] + [409] * 9, results
    stored = LabOrder.objects.get()
    assert stored.status in ("collected", "cancelled")
    assert {item.status for item in stored.items.all()} == {stored.status}


def test_concurrent_billed_orders_all_land_on_the_one_draft(lab: LabWorld) -> None:
    draft = make_invoice(branch=lab.blr, patient=lab.patient, department=lab.department, finalize=False)
    body = {"patient_id": lab.patient.patient_id, "doctor_id": str(lab.doctor.id), "tests": ["CBC"], "bill": True}

    results = all_at_once([_api_post(lab.writer, ORDERS, body)] * 10)

    assert [status for status, _ in results] == [201] * 10, results
    assert {data["invoice_id"] for _, data in results} == {str(draft.id)}
    stored = Invoice.objects.get()
    assert stored.line_items.filter(service__code="LAB-CBC").count() == 10
    assert stored.grand_total == Decimal("1180.00") + 10 * Decimal("350.00")
