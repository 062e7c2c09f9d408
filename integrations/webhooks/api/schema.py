"""Examples of the webhook subscription operations, for the OpenAPI document only (the shapes are the
TypedDicts of integrations.webhooks.representations)."""

from __future__ import annotations

from typing import Any

from clinic.api.schema import example, problem_body, request_example
from integrations.webhooks.models import HEADER_MASK

SUBSCRIPTION_ID = "0b6f3c2a-9d8e-4f71-a2b3-c4d5e6f70819"
BRANCH_ID = "58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw0a+Oe5mn6U4="  # noqa: S105 - an example, not a secret

CREATE_BODY: dict[str, Any] = {
    "name": "Hospital ERP",
    "description": "Bookings and payments for the ERP.",
    "target_url": "https://erp.example.com/hooks/clinic",
    "event_types": ["appointment.booked", "appointment.cancelled", "payment.recorded"],
    "branch_ids": [BRANCH_ID],
    "extra_headers": {"Authorization": "Bearer erp-token-1"},
}
SUBSCRIPTION: dict[str, Any] = {
    "id": SUBSCRIPTION_ID,
    "name": "Hospital ERP",
    "description": "Bookings and payments for the ERP.",
    "target_url": "https://erp.example.com/hooks/clinic",
    "event_types": ["appointment.booked", "appointment.cancelled", "payment.recorded"],
    "branch_ids": [BRANCH_ID],
    "extra_headers": {"Authorization": HEADER_MASK},
    "is_active": True,
    "disabled_reason": None,
    "disabled_at": None,
    "signing_secret_masked": f"whsec_{'•' * 8}6U4=",
    "previous_secret_expires_at": None,
    "created_at": "2026-11-23T09:30:00+05:30",
    "updated_at": "2026-11-23T09:30:00+05:30",
}
DISABLED = {
    **SUBSCRIPTION,
    "is_active": False,
    "disabled_reason": "Disabled by API client Hospital ERP.",
    "disabled_at": "2026-11-24T18:05:00+05:30",
    "updated_at": "2026-11-24T18:05:00+05:30",
}
NEW_SECRET = "whsec_3q1c7DJjv2m8T0dPpH6sXw4Ff9Lr5Yb1Ke2Nn7Gt0Ao="  # noqa: S105 - an example
ROTATED = {
    **SUBSCRIPTION,
    "signing_secret_masked": f"whsec_{'•' * 8}0Ao=",
    "previous_secret_expires_at": "2026-11-26T10:00:00+05:30",
    "updated_at": "2026-11-25T10:00:00+05:30",
    "signing_secret": NEW_SECRET,
}

CREATE_REQUEST = request_example("Subscribe to bookings and payments", CREATE_BODY)
CREATED_EXAMPLE = example("Created, with its secret", {**SUBSCRIPTION, "signing_secret": SECRET}, "201")
LIST_EXAMPLE = example("Subscriptions of the client", [SUBSCRIPTION])
SUBSCRIPTION_EXAMPLE = example("A subscription", SUBSCRIPTION)
DISABLE_REQUEST = request_example("Disable", {"is_active": False})
EDIT_REQUEST = request_example(
    "Change the kinds, keep the header",
    {"event_types": ["appointment.booked"], "extra_headers": {"Authorization": HEADER_MASK}},
)
DISABLED_EXAMPLE = example("Disabled", DISABLED)
ROTATED_EXAMPLE = example("Rotated, with the new secret", ROTATED)
TEST_EVENT_EXAMPLE = example(
    "Queued",
    {
        "id": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
        "type": "webhook.test",
        "subscription_id": SUBSCRIPTION_ID,
        "status": "pending",
        "created_at": "2026-11-25T10:00:00+05:30",
    },
    "202",
)

PRIVATE_TARGET = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[
        {
            "field": "target_url",
            "code": "invalid",
            "message": "The target must be a public address: 169.254.169.254 is a link-local (cloud metadata) "
            "address (169.254.0.0/16).",
        }
    ],
)
UNKNOWN_KIND = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[{"field": "event_types", "code": "invalid", "message": "Unknown event kinds: appointment.teleported."}],
)
