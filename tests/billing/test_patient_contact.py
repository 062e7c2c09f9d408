"""docs/api-rules.md §11.8: a client with billing scopes alone sees who is billed (ids and name) and never the
patient's phone or other contact, in the invoice detail, the list, a draft and the invoice webhooks."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.webhooks.models import WebhookEvent
from tests.billing.factories import get, make_invoice
from tests.factories import BranchFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

PHONE, EMAIL = "+919876543210", "priya.sharma@example.com"


def test_a_billing_client_reads_who_is_billed_but_no_contact(client: Any, token_for: Any) -> None:
    branch = BranchFactory(code="BLR")
    patient = PatientFactory(registration_branch=branch, phone=PHONE, email=EMAIL, address_line1="12 MG Road")
    finalized = make_invoice(branch=branch, patient=patient)
    draft = make_invoice(branch=branch, patient=patient, finalize=False)
    token = token_for(["billing:read"], branches=[branch])

    responses = [
        get(client, token, f"/api/v1/billing/invoices/{finalized.id}"),
        get(client, token, f"/api/v1/billing/invoices/{draft.id}"),
        get(client, token, "/api/v1/billing/invoices", {"patient_id": patient.patient_id}),
    ]

    assert [response.status_code for response in responses] == [200, 200, 200]
    assert responses[0].json()["patient"] == {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "name": patient.name,
    }
    assert responses[1].json()["patient"] == responses[0].json()["patient"]
    assert len(responses[2].json()) == 2
    for response in responses:
        text = response.content.decode()
        for contact in (PHONE, PHONE[3:], EMAIL, "12 MG Road"):
            assert contact not in text
    (event,) = WebhookEvent.objects.filter(type="invoice.finalized")
    assert PHONE[3:] not in event.body().decode()
    assert EMAIL not in event.body().decode()
    assert event.payload["invoice"]["patient"] == responses[0].json()["patient"]
