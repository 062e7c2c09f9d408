"""Malformed input of any kind is a 4xx problem naming what was wrong, never a 500 (docs/api-rules.md §7):
Content-Types without a boundary or with an unknown charset, NUL bytes and Unicode digits in bodies, query
values and paths, deep nesting, oversized bodies, too many form fields, pages past any offset. Each refused
request changes nothing and still leaves its audit row."""

from __future__ import annotations

import base64
import bz2
import io
import json
import logging
import time
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction

from clinic.api.parsers import MAX_JSON_DEPTH, _nesting_depth
from integrations.clients.scopes import SCOPES
from integrations.models import AuditLogEntry
from patients.models import Patient
from tests.clinic.test_operation_contract import OPERATIONS, _url
from tests.factories import BranchFactory
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, assert_token_error, bearer, row_counts
from tests.patients.factories import PatientFactory, aadhaar, post_patient

pytestmark = pytest.mark.django_db

WRITES = [(method, path) for method, path, _ in OPERATIONS if method in {"POST", "PATCH"}]
PATIENT: dict[str, Any] = {
    "first_name": "Asha",
    "last_name": "Rao",
    "date_of_birth": "1990-04-12",
    "gender": "female",
    "phone": "+919876543210",
}


@pytest.fixture
def token(token_for: Any) -> str:
    return token_for(list(SCOPES))


@pytest.fixture
def branch() -> Any:
    return BranchFactory(code="BLR")


@pytest.mark.parametrize(("method", "path"), WRITES, ids=[f"{m} {p}" for m, p in WRITES])
def test_multipart_without_a_boundary_is_400_on_every_post_and_patch_and_changes_nothing(client, token, method, path):
    before = row_counts(exclude=REQUEST_BOOKKEEPING)
    response = client.generic(method, _url(path), b"--x\r\n", content_type="multipart/form-data", **bearer(token))

    body = assert_problem(response, 400, "invalid_request")
    assert body["errors"] == [
        {"field": "Content-Type", "code": "invalid", "message": "Missing or invalid multipart boundary."}
    ]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


@pytest.mark.parametrize("path", ["/api/v1/auth/token", "/api/v1/auth/revoke"])
def test_multipart_without_a_boundary_on_the_token_endpoints_is_an_oauth_invalid_request(client, path):
    response = client.generic("POST", path, b"grant_type=client_credentials", content_type="multipart/form-data")

    assert assert_token_error(response, 400, "invalid_request") == {
        "error": "invalid_request",
        "error_description": "A multipart Content-Type needs a valid boundary.",
    }
    assert AuditLogEntry.objects.get().status == 400


def test_an_unknown_charset_is_400_naming_the_content_type(client, token, branch):
    response = client.generic(
        "POST",
        "/api/v1/patients",
        json.dumps(PATIENT),
        content_type="application/json; charset=klingon",
        **bearer(token),
    )

    assert assert_problem(response, 400, "invalid_request")["errors"][0]["field"] == "Content-Type"
    assert not Patient.objects.exists()


@pytest.mark.parametrize("charset", ["hex", "base64", "zlib", "bz2", "uu", "quopri", "rot13"])
def test_a_charset_that_is_no_text_encoding_is_400_before_the_body_is_decoded(client, token, charset):
    # Each was a 500 (the parser got bytes back); zlib and bz2 inflated the body first (81 bytes of bz2 are
    # 50 MB of zeros), so a 1 MiB body could take a worker's memory.
    body = bz2.compress(b"[" + b"0," * 1000 + b"0]") if charset == "bz2" else b"7b7d"
    response = client.generic(
        "POST", "/api/v1/lab/orders", body, content_type=f"application/json; charset={charset}", **bearer(token)
    )

    body = assert_problem(response, 400, "invalid_request")
    assert body["detail"] == "The Content-Type names a charset that is not a text encoding."
    assert body["errors"][0]["field"] == "Content-Type"


@pytest.mark.parametrize("path", ["/api/v1/auth/token", "/api/v1/auth/revoke"])
@pytest.mark.parametrize("charset", ["latin-1", "utf-16", "hex"])
def test_a_form_body_in_another_charset_than_utf8_is_an_oauth_invalid_request(client, path, charset):
    # Django refuses such a form body while it is read (BadRequest): the token endpoint answered 500.
    response = client.generic(
        "POST",
        path,
        b"grant_type=client_credentials&token=x",
        content_type=f"application/x-www-form-urlencoded; charset={charset}",
    )

    assert assert_token_error(response, 400, "invalid_request")["error_description"] in {
        "A form-encoded body must be UTF-8.",
        "The Content-Type names a charset that is not a text encoding.",
    }
    assert AuditLogEntry.objects.get().status == 400


@pytest.mark.parametrize("charset", ["utf8", "UTF_8", "U8"])
def test_an_alias_of_utf8_is_read_as_utf8_on_the_token_endpoint(client, api_client_factory, charset):
    api_client = api_client_factory(scopes=["appointments:read"])
    form = f"grant_type=client_credentials&client_id={api_client.client_id}&client_secret={api_client.secret}"

    response = client.generic(
        "POST", "/api/v1/auth/token", form, content_type=f"application/x-www-form-urlencoded; charset={charset}"
    )

    assert response.status_code == 200, response.content
    assert response.json()["token_type"] == "Bearer"


def test_nul_in_a_token_form_field_is_invalid_request_and_audited(client):
    response = client.post(
        "/api/v1/auth/token",
        "grant_type=client_credentials&client_id=abc%00def&client_secret=x",
        content_type="application/x-www-form-urlencoded",
    )

    assert_token_error(response, 400, "invalid_request")
    row = AuditLogEntry.objects.get()
    assert (row.status, row.route, row.client_id) == (400, "api/v1/auth/token", None)


def test_nul_in_the_basic_user_name_is_invalid_request(client):
    credentials = base64.b64encode(b"abc\x00def:secret").decode()
    response = client.post(
        "/api/v1/auth/token",
        "grant_type=client_credentials",
        content_type="application/x-www-form-urlencoded",
        HTTP_AUTHORIZATION=f"Basic {credentials}",
    )

    assert_token_error(response, 400, "invalid_request")


def test_nul_in_json_strings_and_keys_is_400_naming_each_field(client, token, branch):
    data = {**PATIENT, "first_name": "As\u0000ha", "address": {"city": "Bengaluru\u0000"}, "no\u0000te": "x"}

    body = assert_problem(post_patient(client, token, data), 400, "validation_error")

    assert {(e["field"], e["code"]) for e in body["errors"]} == {
        ("first_name", "null_characters_not_allowed"),
        ("address.city", "null_characters_not_allowed"),
        ("no\\u0000te", "null_characters_not_allowed"),
    }
    assert not Patient.objects.exists()


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/api/v1/branches?state=%00", "state"),
        ("/api/v1/patients?search=ab%00cd", "search"),
        ("/api/v1/billing/invoices?status=paid%00", "status"),
        ("/api/v1/appointments?date=2026-01-0%00", "date"),
    ],
)
def test_nul_in_a_query_value_is_400_naming_the_parameter(client, token, url, name):
    body = assert_problem(client.get(url, **bearer(token)), 400, "validation_error")

    assert body["errors"] == [
        {"field": name, "code": "null_characters_not_allowed", "message": "NUL and control characters are refused."}
    ]


def test_unicode_digits_in_a_query_value_are_400(client, token):
    body = assert_problem(client.get("/api/v1/patients?page=\u0663", **bearer(token)), 400, "validation_error")

    assert body["errors"] == [{"field": "page", "code": "invalid", "message": "Digits must be ASCII 0-9."}]


def test_nul_in_a_path_id_is_400_and_its_audit_row_is_written(client, token):
    response = client.get("/api/v1/patients/PAT-000001%00", **bearer(token))

    assert assert_problem(response, 400, "invalid_request")["errors"][0]["field"] == "path"
    row = AuditLogEntry.objects.exclude(route="api/v1/auth/token").get()
    assert (row.status, row.path) == (400, "/api/v1/patients/PAT-000001%00")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("national_health_id", "\u096f\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e\u096f\u0966\u0967\u0968\u0969"),
        ("national_id", "".join(chr(0x0660 + int(d)) for d in aadhaar("52739184630"))),
        ("phone", "+\u096f\u0967\u096f\u096e\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e"),
    ],
    ids=["abha-devanagari", "aadhaar-arabic-indic", "phone-devanagari"],
)
def test_identifiers_in_unicode_digits_are_400_naming_the_field_and_nothing_is_logged(
    client, token, branch, field, value, capsys
):
    response = post_patient(client, token, {**PATIENT, field: value})

    body = assert_problem(response, 400, "validation_error")
    assert [e["field"] for e in body["errors"]] == [field]
    assert not Patient.objects.exists()
    assert "Asha" not in capsys.readouterr().err


def _arabic_indic(text: str) -> str:
    return "".join(chr(0x0660 + int(ch)) if ch in "0123456789" else ch for ch in text)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/patients", {**PATIENT, "date_of_birth": _arabic_indic("1990-04-12")}, "date_of_birth"),
        ("/api/v1/patients", {**PATIENT, "branch_id": "{branch}"}, "branch_id"),
        (
            "/api/v1/appointments",
            {
                "patient_id": "PAT-000001",
                "doctor_id": "{uuid}",
                "slot_start": _arabic_indic("2026-11-27T09:00:00+05:30"),
                "slot_end": "2026-11-27T09:15:00+05:30",
            },
            "slot_start",
        ),
        (
            "/api/v1/billing/invoices",
            {"patient_id": "PAT-000001", "date": _arabic_indic("2026-01-05"), "line_items": [{"description": "x"}]},
            "date",
        ),
        (
            "/api/v1/lab/orders",
            {"patient_id": "PAT-000001", "doctor_id": "{uuid}", "branch_id": "{branch}", "tests": ["CBC"]},
            "branch_id",
        ),
    ],
    ids=["patient-birth-date", "patient-branch-uuid", "booking-datetime", "invoice-date", "lab-order-branch-uuid"],
)
def test_dates_times_and_uuids_in_unicode_digits_are_400_naming_the_field(client, token, branch, path, body, field):
    # Django's \d-based date patterns, int() and uuid.UUID read Arabic-Indic digits as 0-9: each of these was a
    # 201 that stored the date, or resolved the branch, as if it had been written in ASCII digits.
    values = {"{branch}": _arabic_indic(str(branch.id)), "{uuid}": "0351663f-cd71-4c6b-be61-c3804cf8b742"}
    body = {key: values.get(value, value) if isinstance(value, str) else value for key, value in body.items()}
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = client.post(path, json.dumps(body), content_type="application/json", **bearer(token))

    errors = assert_problem(response, 400, "validation_error")["errors"]
    assert {"field": field, "code": "invalid", "message": "Digits must be ASCII 0-9."} in errors
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_a_patient_uuid_in_unicode_digits_names_nobody(client, token, branch):
    patient = PatientFactory(registration_branch=branch)
    body = {"patient_id": _arabic_indic(str(patient.id)), "line_items": [{"description": "x"}]}

    response = client.post(
        "/api/v1/billing/invoices", json.dumps(body), content_type="application/json", **bearer(token)
    )

    errors = assert_problem(response, 400, "validation_error")["errors"]
    assert {"field": "patient_id", "code": "invalid", "message": "No such patient available to this client."} in errors


def test_a_pincode_in_unicode_digits_is_400(client, token, branch):
    response = post_patient(client, token, {**PATIENT, "address": {"pincode": "\u096b\u096c\u0966\u0966\u0966\u0967"}})

    assert [e["field"] for e in assert_problem(response, 400, "validation_error")["errors"]] == ["address.pincode"]


def test_json_nested_a_thousand_deep_is_400(client, token):
    response = client.post(
        "/api/v1/patients", "[" * 1000 + "]" * 1000, content_type="application/json", **bearer(token)
    )

    assert assert_problem(response, 400, "parse_error")["detail"] == "Request body is nested deeper than 64 levels."


def test_json_nested_64_deep_is_parsed(client, token, branch):
    nested: Any = "x"
    for _ in range(62):
        nested = [nested]
    response = post_patient(client, token, {**PATIENT, "first_name": nested})

    assert [e["field"] for e in assert_problem(response, 400, "validation_error")["errors"]] == ["first_name"]


def test_brackets_and_escaped_quotes_inside_strings_do_not_count_as_nesting(client, token, branch):
    response = post_patient(client, token, {**PATIENT, "last_name": 'R\\"[{' * 40, "notes": ["]"] * 70})

    assert "parse_error" not in response.content.decode()
    assert {e["field"] for e in assert_problem(response, 400, "validation_error")["errors"]} == {"last_name", "notes"}


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("[" * 64 + "]" * 64 + "[]", 64),
        ("[" * 65 + "]" * 65, 65),
        ('{"a":' * 70 + "1" + "}" * 70, 65),  # stops counting once past the limit
        ('["[[[[\\"]]]]"' + ",[]" * 70 + "]", 2),  # an escaped quote does not end the string
        ('["\\\\"' + "[" * 70, 65),  # an escaped backslash does not escape the quote after it
    ],
)
def test_the_nesting_depth_ignores_string_literals(text, depth):
    assert _nesting_depth(text) == depth


def test_an_unterminated_string_of_escaped_quotes_is_refused_in_linear_time(client, token):
    # Matching whole string literals with a regex rescanned the rest of the body from every escaped quote of
    # an unterminated one: this 256 KB body took minutes of CPU in the parser (1 MiB: half an hour).
    body = "[" * (MAX_JSON_DEPTH + 1) + '"' + '\\"' * 128_000
    started = time.monotonic()
    response = client.post("/api/v1/patients", body, content_type="application/json", **bearer(token))

    assert time.monotonic() - started < 10  # the quadratic scan took minutes; a loaded machine takes < 1 s
    assert assert_problem(response, 400, "parse_error")["detail"] == "Request body is nested deeper than 64 levels."


def test_a_body_over_the_limit_is_413_before_it_is_read(client, token, settings):
    settings.MAX_REQUEST_BODY_BYTES = 2048
    response = client.post(
        "/api/v1/patients", json.dumps({"first_name": "a" * 4096}), content_type="application/json", **bearer(token)
    )

    assert assert_problem(response, 413, "payload_too_large")["detail"] == "The body is larger than 2048 bytes."


def test_a_default_body_limit_of_one_mebibyte(settings, client, token):
    assert settings.MAX_REQUEST_BODY_BYTES == 1024 * 1024
    response = client.post(
        "/api/v1/patients", json.dumps({"x": "a" * 2_600_000}), content_type="application/json", **bearer(token)
    )
    assert_problem(response, 413, "payload_too_large")


def test_more_than_a_thousand_form_fields_on_the_token_endpoint_is_invalid_request(client):
    form = "&".join(f"f{i}=1" for i in range(1200))
    response = client.post("/api/v1/auth/token", form, content_type="application/x-www-form-urlencoded")

    assert assert_token_error(response, 400, "invalid_request")["error_description"] == "Too many form fields."


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/patients?search=asha&page=1000000000000000000",
        "/api/v1/patients?page=1000000000000000000",
        "/api/v1/billing/invoices?page=99999999999999999999",
    ],
)
def test_a_page_past_any_offset_is_400_naming_page(client, token, url):
    body = assert_problem(client.get(url, **bearer(token)), 400, "validation_error")

    assert [e["field"] for e in body["errors"]] == ["page"]


def test_the_last_allowed_page_is_an_empty_list(client, token):
    PatientFactory()
    response = client.get("/api/v1/patients?page=1000000000", **bearer(token))

    assert response.status_code == 200
    assert response.json() == []


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
def test_an_unknown_api_path_is_404_whatever_the_method(client, method):
    response = client.generic(method, "/api/v1/no-such-thing", "{}", content_type="application/json")

    assert_problem(response, 404, "not_found")


def test_a_known_path_with_another_method_is_405_with_allow(client, token):
    response = client.put("/api/v1/patients", "{}", content_type="application/json", **bearer(token))

    assert_problem(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, POST, HEAD, OPTIONS"


ROW_SECRET = "Kavitha Menon 1990-04-12"


def test_postgresql_error_details_never_reach_the_log():
    handler = next(h for h in logging.getLogger().handlers if getattr(h, "name", "") == "console")
    stream, handler.stream = handler.stream, io.StringIO()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE secret_rows (name text CHECK (name ~ '^[0-9]+$'))")
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("INSERT INTO secret_rows VALUES (%s)", [ROW_SECRET])
        except IntegrityError:
            logging.getLogger("clinic.api").exception("Unhandled exception in API view")
        output = handler.stream.getvalue()
    finally:
        handler.stream = stream

    assert 'violates check constraint "secret_rows_name_check" [database detail redacted]' in output
    assert "Kavitha" not in output
    assert "Failing row" not in output
