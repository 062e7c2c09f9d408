"""The problem registry (clinic.api.errors.PROBLEM_KINDS) is built from the domain error classes, each
declaring its kind once: a second declaration of a code is refused, every kind has a status, title and
description, and the registry is complete as soon as Django has started. Django's own ValidationError
raised under a view is a 400 problem naming the fields."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from appointments.errors import CancellationWindow, OutsideAllowedTime, SlotUnavailable
from billing.errors import DuplicatePayment
from clinic import errors as clinic_errors
from clinic.api.errors import API_KINDS, PROBLEM_KINDS, ProblemKind, problem_kinds_build
from clinic.errors import Conflict, DomainError, FieldError, InvalidState, NotFound, RecordNotDeletable
from patients.errors import DuplicatePatient

ROOT = Path(__file__).resolve().parents[2]

# Every kind, exactly as the responses and the /api/v1/problems/{code} pages state it.
EXPECTED = {
    "invalid_request": (400, "Invalid request", "The request cannot be processed as sent."),
    "parse_error": (400, "Malformed request body", "The body is not valid JSON."),
    "unknown_parameter": (
        400,
        "Unknown query parameter",
        "The operation does not take this query parameter; see `errors`.",
    ),
    "validation_error": (400, "Invalid input", "One or more fields are invalid; see `errors`."),
    "invalid_token": (401, "Invalid token", "The bearer token is invalid, expired or revoked."),
    "not_authenticated": (401, "Authentication required", "No bearer token was sent."),
    "insufficient_scope": (403, "Insufficient scope", "The token lacks the scope the operation needs."),
    "ip_not_allowed": (403, "Address not allowed", "The client may not call from this IP address."),
    "permission_denied": (403, "Forbidden", "The client may not perform this operation."),
    "not_found": (404, "Not found", "No such resource, or not visible to this client."),
    "method_not_allowed": (405, "Method not allowed", "See the Allow header."),
    "not_acceptable": (406, "Not acceptable", "The API produces application/json only."),
    "batch_expired": (
        409,
        "Batch expired",
        "The named batch has expired (its expiry date is not after today at the branch): never dispensed.",
    ),
    "cancellation_window": (
        409,
        "Inside the cancellation window",
        "The appointment starts within the branch's cancellation window; only staff can cancel it now. "
        "See cancellable_until.",
    ),
    "conflict": (409, "Conflict", "The request conflicts with the current state."),
    "duplicate_patient": (
        409,
        "Duplicate patient",
        "An active patient has the same phone and date of birth; see existing_patient_id and existing_id.",
    ),
    "duplicate_payment": (
        409,
        "Duplicate payment",
        "The invoice already has a payment with this payment_mode and reference.",
    ),
    "duplicate_refund": (
        409,
        "Duplicate refund",
        "The invoice already has a refund with this payment_mode and reference.",
    ),
    "exceeds_dispensed": (
        409,
        "Exceeds what was dispensed",
        "More units returned than were dispensed on the line less those already returned; `line_id` names the line "
        "and `returnable` what may still come back.",
    ),
    "exceeds_prescription": (
        409,
        "Exceeds the prescription",
        "More units than the prescription item still allows (prescribed less dispensed, returns added back). `drug` "
        "names the drug and `remaining` what may still be dispensed.",
    ),
    "idempotency_key_in_use": (
        409,
        "Idempotency key in use",
        "A request with this Idempotency-Key is still being processed; retry after Retry-After.",
    ),
    "insufficient_stock": (
        409,
        "Insufficient stock",
        "More units were asked for than are on hand: of the drug's non-expired batches at the branch, or of the named "
        "batch. `drug` names the drug and `available` (an integer) what is on hand.",
    ),
    "invalid_state": (
        409,
        "Invalid state",
        "The operation is not allowed in the resource's current status; see current_status.",
    ),
    "not_prescribed": (
        409,
        "Not on the prescription",
        "A dispense against a prescription may only hand over the prescription's drugs; `drug` names the drug. "
        "Dispense anything else separately (an OTC drug without the prescription).",
    ),
    "outside_allowed_time": (
        409,
        "Not allowed at this time",
        "The status change is not allowed yet or any more: check-in only on the appointment's local day, no-show "
        "only once it has started. See allowed_from (and allowed_until).",
    ),
    "prescription_required": (
        409,
        "Prescription required",
        "Schedule H, H1 and X drugs are dispensed against a prescription only; `drug` names the drug.",
    ),
    "record_not_deletable": (
        409,
        "Records are never deleted",
        "Clinical and financial records are never deleted: deactivate or merge the patient, or mark the record "
        "entered in error.",
    ),
    "slot_unavailable": (
        409,
        "Slot unavailable",
        "The interval is not a free slot of the doctor, or the patient already has an appointment then.",
    ),
    "payload_too_large": (413, "Payload too large", "The body exceeds MAX_REQUEST_BODY_BYTES."),
    "unsupported_media_type": (415, "Unsupported media type", "Send application/json."),
    "idempotency_key_reused": (
        422,
        "Idempotency key reused",
        "This Idempotency-Key was used with a different request body.",
    ),
    "rate_limited": (429, "Too many requests", "The client exceeded its rate limit; see Retry-After."),
    "internal_error": (500, "Internal server error", "Report the request_id to support."),
    "encryption_key_mismatch": (
        503,
        "Service unavailable",
        "A stored value cannot be decrypted with the service's FIELD_ENCRYPTION_KEY (a configuration fault: a "
        "restore or a key rotation under way); retry after Retry-After.",
    ),
    "service_unavailable": (
        503,
        "Service unavailable",
        "The database is briefly unreachable or out of a resource (a restart, a full disk, no free "
        "connection); retry after Retry-After.",
    ),
}


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Classes a test defines are registered in a copy, dropped after the test."""
    monkeypatch.setattr(clinic_errors, "_CLASSES", dict(clinic_errors.problem_classes()))


def test_the_registry_holds_every_kind_with_its_status_title_and_description_in_status_order():
    assert {code: (k.status, k.title, k.description) for code, k in PROBLEM_KINDS.items()} == EXPECTED
    assert list(PROBLEM_KINDS) == list(EXPECTED)


def test_every_kind_has_an_error_status_a_title_and_a_description():
    for code, kind in PROBLEM_KINDS.items():
        assert 400 <= kind.status <= 599, code
        assert kind.title.strip() == kind.title != "", code
        assert kind.description.strip() == kind.description != "", code


@pytest.mark.parametrize(
    "error",
    [
        DomainError,
        NotFound,
        Conflict,
        InvalidState,
        RecordNotDeletable,
        FieldError,
        DuplicatePatient,
        SlotUnavailable,
        CancellationWindow,
        OutsideAllowedTime,
        DuplicatePayment,
    ],
)
def test_each_domain_error_class_is_the_registrys_declaration_of_its_kind(error):
    assert PROBLEM_KINDS[error.code] == ProblemKind(error.status, error.title, error.own_description())
    assert clinic_errors.problem_classes()[error.code] is error


def test_invalid_state_is_declared_once_in_clinic_errors():
    assert clinic_errors.problem_classes()["invalid_state"] is InvalidState
    assert [cls for cls in clinic_errors.problem_classes().values() if cls.code == "invalid_state"] == [InvalidState]


def test_a_second_class_declaring_a_taken_code_is_refused_and_the_first_stays(scratch_registry):
    with pytest.raises(TypeError, match="'duplicate_patient' is declared twice"):

        class AnotherDuplicate(Conflict):
            code = "duplicate_patient"
            title = "Someone else"
            description = "Another text."

    assert clinic_errors.problem_classes()["duplicate_patient"] is DuplicatePatient
    assert PROBLEM_KINDS["duplicate_patient"].title == "Duplicate patient"


def test_a_new_class_is_in_the_registry_as_soon_as_it_is_defined(scratch_registry):
    class LabResultPending(Conflict):
        code = "lab_result_pending"
        title = "Result pending"
        description = "The lab result is not released yet."

    assert PROBLEM_KINDS["lab_result_pending"] == ProblemKind(
        409, "Result pending", "The lab result is not released yet."
    )
    assert list(PROBLEM_KINDS).index("lab_result_pending") > list(PROBLEM_KINDS).index("invalid_state")


def _unregistered(base: type[DomainError], code: str, **attributes: Any) -> dict[str, type[DomainError]]:
    """A class declaring `code` and `attributes`, made without registering it (its code is set after the
    class exists), as the one class of a registry to build."""
    cls = type(f"Scratch{base.__name__}", (base,), attributes)
    cls.code = code
    return {code: cls}


def test_a_class_describing_a_kind_the_api_declares_is_refused():
    reused = _unregistered(
        DomainError, "idempotency_key_in_use", status=409, title="Idempotency key in use", description="Again."
    )

    with pytest.raises(ImproperlyConfigured, match="'idempotency_key_in_use' is declared twice"):
        problem_kinds_build(API_KINDS, reused)


def test_a_class_raising_an_api_kind_with_another_status_or_title_is_refused():
    wrong_status = _unregistered(DomainError, "payload_too_large", status=400, title="Payload too large")
    wrong_title = _unregistered(DomainError, "parse_error", status=400, title="Bad JSON")

    with pytest.raises(ImproperlyConfigured, match="disagrees"):
        problem_kinds_build(API_KINDS, wrong_status)
    with pytest.raises(ImproperlyConfigured, match="disagrees"):
        problem_kinds_build(API_KINDS, wrong_title)


def test_a_class_raising_an_api_kind_with_its_status_and_title_takes_the_apis_description():
    raising = _unregistered(DomainError, "payload_too_large", status=413, title="Payload too large")

    assert problem_kinds_build(API_KINDS, raising) == API_KINDS


def test_a_class_with_a_code_of_its_own_but_no_description_is_refused():
    # It would otherwise show the description it inherits (Conflict's) on its page.
    undescribed = _unregistered(Conflict, "undescribed", title="Undescribed")

    with pytest.raises(ImproperlyConfigured, match="no description"):
        problem_kinds_build(API_KINDS, undescribed)


def test_the_registry_is_complete_once_django_has_started_before_any_urlconf_or_view_is_imported():
    script = (
        "import django, json, sys; django.setup(); "
        "from clinic.api.errors import PROBLEM_KINDS; "
        "loaded = sorted(m for m in sys.modules if m.endswith(('.api.views', '.services', 'clinic.urls'))); "
        "print(json.dumps({'codes': list(PROBLEM_KINDS), 'loaded': loaded}))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "clinic.settings"}
    result = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )

    started = json.loads(result.stdout.strip().splitlines()[-1])
    assert started["codes"] == list(EXPECTED)
    assert not [m for m in started["loaded"] if m.endswith(".api.views") or m == "clinic.urls"], started["loaded"]


# --- Django's ValidationError -------------------------------------------------------------------------


class _Refusing(APIView):
    authentication_classes = ()
    permission_classes = ()
    error = DjangoValidationError("unset")

    def post(self, request: Request) -> Response:
        raise self.error


def _answer(error: DjangoValidationError) -> Any:
    view = _Refusing.as_view(error=error)
    response = view(APIRequestFactory().post("/api/v1/anything", {}, format="json"))
    response.render()
    return response


def test_a_django_validation_error_raised_in_a_service_is_a_400_problem_naming_each_field():
    response = _answer(
        DjangoValidationError(
            {
                "phone": [DjangoValidationError("Enter a valid phone number.", code="invalid_phone")],
                "date_of_birth": ["Cannot be in the future."],
                "__all__": [DjangoValidationError("%(name)s is inactive.", code="inactive", params={"name": "PAT-1"})],
            }
        )
    )

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content) == {
        "type": "/api/v1/problems/validation_error",
        "title": "Invalid input",
        "status": 400,
        "detail": "The request has invalid fields.",
        "code": "validation_error",
        "request_id": "-",
        "errors": [
            {"field": "phone", "code": "invalid_phone", "message": "Enter a valid phone number."},
            {"field": "date_of_birth", "code": "invalid", "message": "Cannot be in the future."},
            {"field": None, "code": "inactive", "message": "PAT-1 is inactive."},
        ],
    }


def test_a_django_validation_error_without_fields_is_a_400_problem_with_a_fieldless_error():
    response = _answer(DjangoValidationError(["First.", "Second."]))

    assert response.status_code == 400
    assert json.loads(response.content)["errors"] == [
        {"field": None, "code": "invalid", "message": "First."},
        {"field": None, "code": "invalid", "message": "Second."},
    ]
