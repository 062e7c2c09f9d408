"""The conventions every endpoint shares: problem+json errors, strict bodies, header pagination,
request ids and exact decimals. Write paths go through the test-only POST /api/v1/test/departments."""

from __future__ import annotations

import io
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from rest_framework import serializers

from clinic.api import meta_views
from clinic.api.errors import PROBLEM_KINDS, validation_errors
from clinic.api.parsers import JSONParser
from clinic.api.renderers import dumps
from clinic.api.serializers import StrictSerializer
from clinic.models import Department
from integrations.models import IdempotencyRecord
from tests.factories import BranchFactory
from tests.helpers import assert_problem, bearer, parse_links

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.plumbing_urls")]

DEPARTMENTS_URL = "/api/v1/test/departments"
BRANCHES_URL = "/api/v1/branches"
BOOM_URL = "/api/v1/test/boom"
HEX32 = re.compile(r"^[0-9a-f]{32}$")


def post_department(client: Any, token: str, body: Any, **extra: Any) -> Any:
    data = body if isinstance(body, str) else json.dumps(body)
    extra.setdefault("content_type", "application/json")
    return client.post(DEPARTMENTS_URL, data, **bearer(token), **extra)


@pytest.fixture
def writer(token_for: Any) -> str:
    return token_for(["appointments:write"])


@pytest.fixture
def reader(token_for: Any) -> str:
    return token_for(["appointments:read"])


def sorted_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(body["errors"], key=lambda error: (error["field"] or "", error["code"]))


# --- Request bodies -------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ['{"name": "Cardiology"', "{'name': 'Cardiology'}", '{"name": "x",}', "Cardiology"])
def test_a_body_that_is_not_json_is_400_parse_error(client, writer, raw):
    response = post_department(client, writer, raw)

    body = assert_problem(response, 400, "parse_error")
    assert len(body["errors"]) == 1
    assert body["errors"][0]["field"] is None
    assert body["errors"][0]["code"] == "parse_error"
    assert Department.objects.count() == 0


@pytest.mark.parametrize(
    ("content_type", "data"),
    [
        ("application/x-www-form-urlencoded", "name=Cardiology"),
        ("text/plain", '{"name": "Cardiology"}'),
        (
            "multipart/form-data; boundary=BoUnDaRy",
            '--BoUnDaRy\r\nContent-Disposition: form-data; name="name"\r\n\r\nX\r\n--BoUnDaRy--\r\n',
        ),
    ],
    ids=["form-encoded", "text-plain", "multipart"],
)
def test_a_body_that_is_not_json_by_content_type_is_415(client, writer, content_type, data):
    response = post_department(client, writer, data, content_type=content_type)

    body = assert_problem(response, 415, "unsupported_media_type")
    assert content_type.split(";")[0] in body["detail"]
    assert Department.objects.count() == 0


def test_every_unknown_field_is_named_alongside_ordinary_field_errors_in_one_response(client, writer):
    response = post_department(
        client,
        writer,
        {"nmae": "Cardiology", "colour": "red", "address": {"line1": "MG Road", "pincode": "56001", "foo": 1}},
    )

    body = assert_problem(response, 400, "validation_error")
    assert sorted_errors(body) == [
        {"field": "address.foo", "code": "unknown_field", "message": "Unknown field."},
        {"field": "address.pincode", "code": "invalid", "message": "This value does not match the required pattern."},
        {"field": "colour", "code": "unknown_field", "message": "Unknown field."},
        {"field": "name", "code": "required", "message": "This field is required."},
        {"field": "nmae", "code": "unknown_field", "message": "Unknown field."},
    ]
    assert Department.objects.count() == 0


def test_unknown_fields_alone_are_rejected_even_when_everything_else_is_valid(client, writer):
    response = post_department(
        client, writer, {"name": "Cardiology", "address": {"line1": "MG Road", "pincode": "560001", "floor": 2}}
    )

    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [{"field": "address.floor", "code": "unknown_field", "message": "Unknown field."}]
    assert Department.objects.count() == 0


def test_a_missing_required_field_is_a_field_error_with_code_required(client, writer):
    response = post_department(client, writer, {"description": "Heart"})

    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [{"field": "name", "code": "required", "message": "This field is required."}]
    assert Department.objects.count() == 0


@pytest.mark.parametrize("raw", ['[{"name": "Cardiology"}]', '"Cardiology"', "42"])
def test_a_body_that_is_not_an_object_is_a_400_without_a_field(client, writer, raw):
    response = post_department(client, writer, raw)

    body = assert_problem(response, 400, "validation_error")
    assert [(error["field"], error["code"]) for error in body["errors"]] == [(None, "invalid")]
    assert Department.objects.count() == 0


def test_a_valid_body_creates_the_department(client, writer):
    response = post_department(client, writer, {"name": "Cardiology", "description": "Heart"})

    assert response.status_code == 201, response.content
    department = Department.objects.get()
    assert (department.name, department.description) == ("Cardiology", "Heart")
    assert response.json() == {"id": str(department.id), "name": "Cardiology", "fee": None}
    assert response["Location"] == f"/d/{department.id}"


class _Item(StrictSerializer):
    code = serializers.CharField()


class _Order(StrictSerializer):
    items = _Item(many=True)


def test_unknown_fields_inside_list_items_are_named_by_index():
    body = _Order(data={"items": [{"code": "A"}, {"code": "B", "qty": 2}, {"cod": "C"}], "note": "x"})

    assert not body.is_valid()
    assert sorted(validation_errors(body.errors), key=lambda e: e["field"]) == [
        {"field": "items.1.qty", "code": "unknown_field", "message": "Unknown field."},
        {"field": "items.2.cod", "code": "unknown_field", "message": "Unknown field."},
        {"field": "items.2.code", "code": "required", "message": "This field is required."},
        {"field": "note", "code": "unknown_field", "message": "Unknown field."},
    ]


# --- Denied requests change nothing ---------------------------------------------------------------


def test_a_request_without_a_token_is_401_and_creates_nothing(client):
    response = client.post(DEPARTMENTS_URL, {"name": "Cardiology"}, content_type="application/json")

    assert_problem(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer ")
    assert Department.objects.count() == 0


def test_a_request_with_an_unknown_token_is_401_invalid_token_and_creates_nothing(client):
    response = post_department(client, "not-a-real-token", {"name": "Cardiology"})

    assert_problem(response, 401, "invalid_token")
    assert 'error="invalid_token"' in response["WWW-Authenticate"]
    assert Department.objects.count() == 0


def test_a_token_without_the_write_scope_is_403_and_creates_nothing(client, reader):
    response = post_department(client, reader, {"name": "Cardiology"}, HTTP_IDEMPOTENCY_KEY="k-1")

    assert_problem(response, 403, "insufficient_scope")
    assert 'error="insufficient_scope"' in response["WWW-Authenticate"]
    assert 'scope="appointments:write"' in response["WWW-Authenticate"]
    assert Department.objects.count() == 0
    assert IdempotencyRecord.objects.count() == 0


def test_a_malformed_body_from_an_unauthenticated_caller_is_401_not_400(client):
    response = client.post(DEPARTMENTS_URL, '{"name": ', content_type="application/json")

    assert_problem(response, 401, "not_authenticated")
    assert Department.objects.count() == 0


# --- Decimals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "written"),
    [("1180.50", "1180.50"), ("1180.5", "1180.50"), ("0.30", "0.30"), ("0.1", "0.10"), ("99999999.99", "99999999.99")],
)
def test_money_is_written_back_as_an_exact_json_number(client, writer, sent, written):
    response = post_department(client, writer, f'{{"name": "Cardiology", "fee": {sent}}}')

    assert response.status_code == 201, response.content
    assert f'"fee":{written}'.encode() in response.content
    assert response.json(parse_float=Decimal)["fee"] == Decimal(written)


@pytest.mark.parametrize("sent", ["1.0000000000000000001", "12.340000000000000000001"])
def test_json_numbers_beyond_float_precision_reach_the_serializer_unchanged(client, writer, sent):
    # Through a float these would round to 1.0 and 12.34 and pass; kept exact, they have too many digits.
    response = post_department(client, writer, f'{{"name": "Cardiology", "fee": {sent}}}')

    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [
        {"field": "fee", "code": "max_digits", "message": "Ensure that there are no more than 10 digits in total."}
    ]
    assert Department.objects.count() == 0


def test_the_parser_reads_fractions_as_decimal_and_the_renderer_writes_them_exactly():
    parsed = JSONParser().parse(io.BytesIO(b'{"a": 0.1, "b": 0.2, "big": 12345678901234567890.123456789, "n": 7}'))

    assert parsed == {
        "a": Decimal("0.1"),
        "b": Decimal("0.2"),
        "big": Decimal("12345678901234567890.123456789"),
        "n": 7,
    }
    assert dumps({"sum": parsed["a"] + parsed["b"], "big": parsed["big"]}) == (
        b'{"sum":0.3,"big":12345678901234567890.123456789}'
    )


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_a_parse_error(client, writer, constant):
    response = post_department(client, writer, f'{{"name": "Cardiology", "fee": {constant}}}')

    assert_problem(response, 400, "parse_error")
    assert Department.objects.count() == 0


# --- Pagination -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("page=0", [("page", "min_value")]),
        ("page=-1", [("page", "min_value")]),
        ("page=abc", [("page", "invalid")]),
        ("per_page=0", [("per_page", "min_value")]),
        ("per_page=101", [("per_page", "max_value")]),
        ("per_page=x", [("per_page", "invalid")]),
        ("page=0&per_page=101", [("page", "min_value"), ("per_page", "max_value")]),
    ],
)
def test_page_parameters_out_of_range_are_400_naming_the_parameter(client, reader, query, expected):
    BranchFactory(code="BLR")

    response = client.get(f"{BRANCHES_URL}?{query}", **bearer(reader))

    body = assert_problem(response, 400, "validation_error")
    assert [(error["field"], error["code"]) for error in sorted_errors(body)] == expected


@pytest.fixture
def five_branches() -> list[Any]:
    return [BranchFactory(code=code) for code in ("E01", "A01", "D01", "B01", "C01")]


def test_a_middle_page_links_first_prev_next_and_last(client, reader, five_branches):
    response = client.get(f"{BRANCHES_URL}?per_page=2&page=2", **bearer(reader))

    assert response.status_code == 200
    assert [branch["code"] for branch in response.json()] == ["C01", "D01"]
    assert response["X-Total-Count"] == "5"
    assert [re.search(r'rel="(\w+)"', part).group(1) for part in response["Link"].split(", ")] == [
        "first",
        "prev",
        "next",
        "last",
    ]
    assert parse_links(response["Link"], BRANCHES_URL) == {
        "first": {"page": ["1"], "per_page": ["2"]},
        "prev": {"page": ["1"], "per_page": ["2"]},
        "next": {"page": ["3"], "per_page": ["2"]},
        "last": {"page": ["3"], "per_page": ["2"]},
    }


def test_the_first_page_has_no_prev_and_the_last_page_no_next(client, reader, five_branches):
    first = client.get(f"{BRANCHES_URL}?per_page=2", **bearer(reader))
    last = client.get(f"{BRANCHES_URL}?per_page=2&page=3", **bearer(reader))

    assert [branch["code"] for branch in first.json()] == ["A01", "B01"]
    assert parse_links(first["Link"], BRANCHES_URL) == {
        "first": {"page": ["1"], "per_page": ["2"]},
        "next": {"page": ["2"], "per_page": ["2"]},
        "last": {"page": ["3"], "per_page": ["2"]},
    }
    assert [branch["code"] for branch in last.json()] == ["E01"]
    assert parse_links(last["Link"], BRANCHES_URL) == {
        "first": {"page": ["1"], "per_page": ["2"]},
        "prev": {"page": ["2"], "per_page": ["2"]},
        "last": {"page": ["3"], "per_page": ["2"]},
    }


def test_links_keep_the_filters_of_the_request(client, reader, five_branches):
    response = client.get(f"{BRANCHES_URL}?state=karnataka&per_page=2&page=2", **bearer(reader))

    assert response.status_code == 200
    assert parse_links(response["Link"], BRANCHES_URL)["next"] == {
        "page": ["3"],
        "per_page": ["2"],
        "state": ["karnataka"],
    }


@pytest.mark.parametrize("page", ["4", "7", str(10**9)])  # past 10**9: 400 (tests/clinic/test_malformed_input.py)
def test_a_page_past_the_end_is_an_empty_array_with_the_total(client, reader, five_branches, page):
    response = client.get(f"{BRANCHES_URL}?per_page=2&page={page}", **bearer(reader))

    assert response.status_code == 200
    assert response.json() == []
    assert response["X-Total-Count"] == "5"
    assert "next" not in parse_links(response["Link"], BRANCHES_URL)


def test_defaults_are_page_one_of_twenty(client, reader):
    for number in range(21):
        BranchFactory(code=f"P{number:02d}")

    response = client.get(BRANCHES_URL, **bearer(reader))

    assert [branch["code"] for branch in response.json()] == [f"P{number:02d}" for number in range(20)]
    assert response["X-Total-Count"] == "21"
    assert parse_links(response["Link"], BRANCHES_URL)["last"] == {"page": ["2"], "per_page": ["20"]}


def test_an_empty_list_has_a_zero_total_and_one_page(client, reader):
    response = client.get(BRANCHES_URL, **bearer(reader))

    assert response.status_code == 200
    assert response.json() == []
    assert response["X-Total-Count"] == "0"
    assert parse_links(response["Link"], BRANCHES_URL) == {
        "first": {"page": ["1"], "per_page": ["20"]},
        "last": {"page": ["1"], "per_page": ["20"]},
    }


# --- Routing and negotiation errors ---------------------------------------------------------------


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
@pytest.mark.parametrize("path", ["/api/v1/nothing-here", "/api/v1/branches/", "/api/v2/branches", "/api/"])
def test_an_unknown_api_route_is_a_problem_404_never_html(client, settings, reader, debug, path):
    settings.DEBUG = debug

    response = client.get(path, **bearer(reader))

    body = assert_problem(response, 404, "not_found")
    assert path in body["detail"]
    assert b"<html" not in response.content.lower()


def test_a_method_the_endpoint_lacks_is_405_with_allow(client, reader):
    response = client.post(BRANCHES_URL, {}, content_type="application/json", **bearer(reader))

    assert_problem(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD, OPTIONS"


def test_asking_for_html_is_406(client, reader):
    response = client.get(BRANCHES_URL, HTTP_ACCEPT="text/html", **bearer(reader))

    assert_problem(response, 406, "not_acceptable")


@pytest.mark.parametrize("accept", ["application/json", "application/*", "*/*", "text/html, application/json;q=0.5"])
def test_any_accept_that_admits_json_is_served(client, reader, accept):
    response = client.get(BRANCHES_URL, HTTP_ACCEPT=accept, **bearer(reader))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_an_unhandled_exception_is_a_bare_500_problem_without_details(client, settings, reader, debug):
    settings.DEBUG = debug

    response = client.get(BOOM_URL, **bearer(reader))

    assert response.status_code == 500
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body == {
        "type": "/api/v1/problems/internal_error",
        "title": "Internal server error",
        "status": 500,
        "code": "internal_error",
        "request_id": response["X-Request-ID"],
    }
    for leak in (b"Jane", b"123412341234", b"RuntimeError", b"Traceback", b"plumbing_urls"):
        assert leak not in response.content


class _ExplodingRegistry:
    def get(self, code: str) -> Any:
        raise RuntimeError("patient Jane Doe, national id 123412341234")


@pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])
def test_an_exception_outside_drf_under_api_is_a_bare_500_problem(client, settings, monkeypatch, debug):
    settings.DEBUG = debug
    # /api/v1/problems/{code} is a plain Django view: its failure is caught by the API middleware.
    monkeypatch.setattr(meta_views, "PROBLEM_KINDS", _ExplodingRegistry())

    response = client.get("/api/v1/problems/not_found")

    assert response.status_code == 500
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "/api/v1/problems/internal_error",
        "title": "Internal server error",
        "status": 500,
        "code": "internal_error",
        "request_id": response["X-Request-ID"],
    }
    assert b"Jane" not in response.content


def test_every_problem_type_uri_is_served(client):
    for code, kind in PROBLEM_KINDS.items():
        response = client.get(f"/api/v1/problems/{code}")
        assert response.status_code == 200, code
        assert response.json() == {
            "code": code,
            "status": kind.status,
            "title": kind.title,
            "description": kind.description,
        }

    assert_problem(client.get("/api/v1/problems/no_such_problem"), 404, "not_found")


# --- Request ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize("incoming", ["abc-123", "req_01HZX.4:a", "A" * 128])
def test_a_valid_incoming_request_id_is_echoed_on_success_and_error(client, reader, incoming):
    ok = client.get(BRANCHES_URL, HTTP_X_REQUEST_ID=incoming, **bearer(reader))
    error = client.get(f"{BRANCHES_URL}?page=0", HTTP_X_REQUEST_ID=incoming, **bearer(reader))

    assert ok.status_code == 200
    assert ok["X-Request-ID"] == incoming
    assert assert_problem(error, 400, "validation_error")["request_id"] == incoming


@pytest.mark.parametrize("incoming", ["has spaces", "a" * 300, "", "semi;colon", "new\tline", "ünïcode"])
def test_an_invalid_incoming_request_id_is_replaced_by_a_generated_one(client, reader, incoming):
    response = client.get(f"{BRANCHES_URL}?page=0", HTTP_X_REQUEST_ID=incoming, **bearer(reader))

    body = assert_problem(response, 400, "validation_error")
    assert HEX32.match(response["X-Request-ID"])
    assert body["request_id"] == response["X-Request-ID"]


def test_each_request_gets_its_own_generated_id_even_outside_the_api(client, reader):
    ids = [client.get(BRANCHES_URL, **bearer(reader))["X-Request-ID"] for _ in range(3)]
    ids.append(client.get("/healthz")["X-Request-ID"])

    assert all(HEX32.match(request_id) for request_id in ids)
    assert len(set(ids)) == 4


def test_an_idempotency_key_on_a_get_is_ignored(client, reader):
    response = client.get(BRANCHES_URL, HTTP_IDEMPOTENCY_KEY="k" * 300, **bearer(reader))

    assert response.status_code == 200
    assert not response.has_header("Idempotent-Replayed")
    assert IdempotencyRecord.objects.count() == 0
