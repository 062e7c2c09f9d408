"""Factories and helpers shared by the billing tests. Invoices are made through billing.services, so their
stored totals are always what the services compute."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

import factory
from django.forms.models import model_to_dict
from django.test import Client

from billing import services
from billing.models import BillableService, Invoice, InvoiceNumberCounter, Payment
from clinic.api.renderers import dumps
from clinic.lib import tax
from tests.factories import DepartmentFactory
from tests.helpers import bearer

INVOICES = "/api/v1/billing/invoices"
SUMMARY = "/api/v1/billing/summary"
# Every billing operation: method, path (with {id} for an invoice), the scope it needs, a valid body.
OPERATIONS: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("get", "/api/v1/billing/invoices", "billing:read", None),
    ("post", "/api/v1/billing/invoices", "billing:write", {"patient_id": "PAT-000001", "line_items": []}),
    ("get", "/api/v1/billing/invoices/{id}", "billing:read", None),
    ("patch", "/api/v1/billing/invoices/{id}", "billing:write", {"date": "2026-11-02"}),
    ("post", "/api/v1/billing/invoices/{id}/finalize", "billing:write", {}),
    ("post", "/api/v1/billing/invoices/{id}/cancel", "billing:write", {"reason": "x"}),
    ("post", "/api/v1/billing/invoices/{id}/payments", "billing:write", {"amount": 10, "payment_mode": "cash"}),
    ("get", "/api/v1/billing/summary", "billing:read", None),
]
OPERATION_IDS = [f"{method} {path}" for method, path, _, _ in OPERATIONS]


class BillableServiceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BillableService
        django_get_or_create = ("code",)

    code = factory.Sequence(lambda n: f"SVC-{n:04d}")
    name = factory.Sequence(lambda n: f"Service {n}")
    department = factory.SubFactory(DepartmentFactory)
    rate = Decimal("500.00")
    tax_rate = Decimal("18.00")
    tax_category = factory.LazyAttribute(lambda service: tax.default_tax_category(service.tax_rate))


def line(
    department: Any,
    rate: str = "1000.00",
    tax_rate: str = "18",
    quantity: str = "1",
    discount: str = "0.00",
    name: str = "Consultation",
) -> services.LineInput:
    return services.LineInput(
        service_name=name,
        department=department,
        rate=Decimal(rate),
        tax_rate=Decimal(tax_rate),
        quantity=Decimal(quantity),
        discount=Decimal(discount),
    )


def make_invoice(
    *,
    branch: Any,
    patient: Any,
    department: Any = None,
    lines: list[services.LineInput] | None = None,
    finalize: bool = True,
    on: date | None = None,
) -> Invoice:
    """An invoice through the service; by default one line of 1000.00 at 18 % (grand total 1180.00)."""
    if lines is None:
        lines = [line(department or DepartmentFactory())]
    return services.invoice_create(branch=branch, patient=patient, line_items=lines, invoice_date=on, finalize=finalize)


def pay(invoice: Invoice, amount: str, mode: str = "cash", reference: str = "", on: date | None = None) -> Payment:
    return services.payment_record(
        invoice=invoice, amount=Decimal(amount), payment_mode=mode, reference=reference, payment_date=on
    )


def post_json(client: Client, token: str, url: str, body: Any, key: str | None = None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    data = body if isinstance(body, str) else dumps(body)
    return client.post(url, data, content_type="application/json", **bearer(token), **headers)


def patch_json(client: Client, token: str, url: str, body: Any) -> Any:
    return client.patch(url, dumps(body), content_type="application/json", **bearer(token))


def get(client: Client, token: str, url: str, params: dict[str, Any] | None = None) -> Any:
    return client.get(url, params or {}, **bearer(token))


def body(response: Any) -> Any:
    """The JSON body with numbers read as Decimal, so money is compared exactly (1180.50, not a float)."""
    return json.loads(response.content, parse_float=Decimal)


def snapshot(invoice: Invoice) -> dict[str, Any]:
    """Every stored column of the invoice, its lines and payments, and its branch's number counters."""
    fresh = Invoice.objects.get(pk=invoice.pk)
    row = model_to_dict(fresh, exclude=[])
    row.update(
        {name: getattr(fresh, name) for name in ("invoice_number", "financial_year", "created_at", "updated_at")}
    )
    row["lines"] = list(fresh.line_items.order_by("position").values())
    row["payments"] = list(fresh.payments.order_by("recorded_at").values())
    row["counters"] = list(
        InvoiceNumberCounter.objects.filter(branch_id=fresh.branch_id).values_list("financial_year", "last_number")
    )
    return row
