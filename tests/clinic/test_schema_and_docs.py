"""GET /api/v1/schema (OpenAPI 3.1) and GET /api/v1/docs: served without a token or internet access."""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.django_db

SCHEMA_URL = "/api/v1/schema"
ALL_SCOPES = {
    "patients:read",
    "patients:write",
    "appointments:read",
    "appointments:write",
    "billing:read",
    "billing:write",
    "lab:read",
    "lab:write",
    "pharmacy:read",
    "pharmacy:write",
    "emr:read",
    "webhooks:manage",
}
# Contract section 3: the scope of each operation, for those the schema has (more arrive as apps grow).
CONTRACT_SCOPES = {
    ("get", "/api/v1/branches"): "appointments:read",
    ("get", "/api/v1/patients"): "patients:read",
    ("post", "/api/v1/patients"): "patients:write",
    ("get", "/api/v1/doctors"): "appointments:read",
    ("get", "/api/v1/appointments"): "appointments:read",
    ("post", "/api/v1/appointments"): "appointments:write",
    ("get", "/api/v1/invoices"): "billing:read",
    ("post", "/api/v1/invoices"): "billing:write",
}
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture(scope="module")
def schema(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get(SCHEMA_URL, {"format": "json"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/vnd.oai.openapi+json"
    return json.loads(response.content)


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    ]


def test_the_schema_is_served_without_a_token_as_yaml_by_default(client):
    response = client.get(SCHEMA_URL)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    document = yaml.safe_load(response.content)
    assert str(document["openapi"]).startswith("3.1")
    assert "/api/v1/branches" in document["paths"]


def test_the_schema_is_served_as_json_on_request(client):
    response = client.get(SCHEMA_URL, HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/vnd.oai.openapi+json"
    assert json.loads(response.content)["openapi"].startswith("3.1")


def test_accept_application_json_gives_the_same_document_as_json_that_yaml_gives_by_default(client):
    as_json = client.get(SCHEMA_URL, HTTP_ACCEPT="application/json")
    as_yaml = client.get(SCHEMA_URL)

    assert as_json.status_code == as_yaml.status_code == 200
    assert as_json["Content-Type"] == "application/json"
    assert as_yaml["Content-Type"] == "application/vnd.oai.openapi; charset=utf-8"
    assert json.loads(as_json.content) == yaml.safe_load(as_yaml.content)
    for response in (as_json, as_yaml):
        assert response["Vary"] == "Accept, Accept-Encoding"
        assert response["Cache-Control"] == "public, no-cache"
        assert response["Content-Length"] == str(len(response.content))
        assert "Content-Encoding" not in response


def test_format_json_in_the_query_gives_json(client):
    response = client.get(SCHEMA_URL, {"format": "json"})

    assert response["Content-Type"] == "application/vnd.oai.openapi+json"
    assert response.content == client.get(SCHEMA_URL, HTTP_ACCEPT="application/vnd.oai.openapi+json").content


@pytest.mark.parametrize("accept", ["application/json", "application/vnd.oai.openapi"])
def test_with_accept_encoding_gzip_the_body_is_gzip_of_the_same_document(client, accept):
    plain = client.get(SCHEMA_URL, HTTP_ACCEPT=accept)
    compressed = client.get(SCHEMA_URL, HTTP_ACCEPT=accept, HTTP_ACCEPT_ENCODING="br;q=1.0, gzip;q=0.8")

    assert compressed.status_code == 200
    assert compressed["Content-Encoding"] == "gzip"
    assert compressed["Content-Type"] == plain["Content-Type"]
    assert compressed["Content-Length"] == str(len(compressed.content))
    assert len(compressed.content) * 5 < len(plain.content)
    assert gzip.decompress(compressed.content) == plain.content
    assert compressed["ETag"] == plain["ETag"][:-1] + '-gzip"'
    assert compressed["Vary"] == "Accept, Accept-Encoding"


@pytest.mark.parametrize("encoding", ["", "identity", "gzip;q=0", "deflate, br"])
def test_without_gzip_among_the_accepted_encodings_the_body_is_plain(client, encoding):
    response = client.get(SCHEMA_URL, HTTP_ACCEPT="application/json", HTTP_ACCEPT_ENCODING=encoding)

    assert "Content-Encoding" not in response
    assert json.loads(response.content)["openapi"].startswith("3.1")


def test_a_matching_if_none_match_is_a_304_without_a_body_and_another_tag_the_document(client):
    first = client.get(SCHEMA_URL, HTTP_ACCEPT="application/json")
    etag = first["ETag"]

    again = client.get(SCHEMA_URL, HTTP_ACCEPT="application/json", HTTP_IF_NONE_MATCH=etag)
    weak = client.get(SCHEMA_URL, HTTP_ACCEPT="application/json", HTTP_IF_NONE_MATCH=f'"other", W/{etag}')
    other = client.get(SCHEMA_URL, HTTP_ACCEPT="application/json", HTTP_IF_NONE_MATCH='"other"')
    yaml_with_json_tag = client.get(SCHEMA_URL, HTTP_IF_NONE_MATCH=etag)

    assert re.fullmatch(r'"[0-9a-f]{32}"', etag)
    assert (again.status_code, again.content, again["ETag"]) == (304, b"", etag)
    assert again["Vary"] == "Accept, Accept-Encoding"
    assert weak.status_code == 304
    assert (other.status_code, other.content) == (200, first.content)
    assert yaml_with_json_tag.status_code == 200
    assert yaml_with_json_tag["ETag"] != etag


def test_the_document_is_built_once_per_process_and_served_from_memory(client):
    from clinic.api import schema_views

    client.get(SCHEMA_URL, HTTP_ACCEPT="application/json")
    built = schema_views._document.cache_info().misses

    for _ in range(3):
        client.get(SCHEMA_URL, HTTP_ACCEPT="application/json", HTTP_ACCEPT_ENCODING="gzip")
        client.get(SCHEMA_URL)

    assert schema_views._document.cache_info().misses == built


def test_the_served_document_points_at_the_fhir_capability_statement_by_an_absolute_url(schema):
    # externalDocs.url must be an absolute URI (Spectral's oas3-schema rule): the served document knows its
    # host; the CapabilityStatement links back to this document.
    assert schema["externalDocs"] == {
        "description": "FHIR R4 CapabilityStatement",
        "url": "http://testserver/fhir/R4/metadata",
    }


def test_the_document_is_openapi_3_1(schema):
    assert schema["openapi"].startswith("3.1")
    assert schema["info"]["title"] == "Clinic Management Integration API"


def test_the_oauth2_client_credentials_scheme_lists_every_scope(schema):
    scheme = schema["components"]["securitySchemes"]["oauth2"]

    assert scheme["type"] == "oauth2"
    assert list(scheme["flows"]) == ["clientCredentials"]
    flow = scheme["flows"]["clientCredentials"]
    assert flow["tokenUrl"] == "/api/v1/auth/token"
    assert set(flow["scopes"]) == ALL_SCOPES
    assert all(description for description in flow["scopes"].values())


def test_every_operation_outside_auth_requires_exactly_one_scope(schema):
    checked = 0
    for method, path, operation in operations(schema):
        if path.startswith("/api/v1/auth/"):
            continue
        security = operation.get("security")
        assert isinstance(security, list), (method, path)
        assert len(security) == 1, (method, path, security)
        assert list(security[0]) == ["oauth2"], (method, path, security)
        (scope,) = security[0]["oauth2"]
        assert scope in ALL_SCOPES, (method, path, scope)
        assert operation["x-required-scope"] == scope, (method, path)
        if (method, path) in CONTRACT_SCOPES:
            assert scope == CONTRACT_SCOPES[(method, path)], (method, path)
        checked += 1
    assert checked >= 1


def test_the_auth_endpoints_are_documented_and_need_no_token(schema):
    token = schema["paths"]["/api/v1/auth/token"]["post"]
    revoke = schema["paths"]["/api/v1/auth/revoke"]["post"]

    assert token["security"] == []
    assert revoke["security"] == []
    assert "x-required-scope" not in token
    token_form = token["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    assert token_form["properties"]["grant_type"]["enum"] == ["client_credentials"]
    assert {"200", "400", "401"} <= set(token["responses"])
    assert set(revoke["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]["required"]) == {"token"}


def test_the_auth_endpoints_document_every_status_they_answer_with_an_open_error_code(schema):
    for path in ("/api/v1/auth/token", "/api/v1/auth/revoke"):
        responses = schema["paths"][path]["post"]["responses"]
        assert {"400", "401", "403", "413", "429", "503"} <= set(responses), path
        assert responses["503"]["headers"]["Retry-After"]["required"] is True
        error = responses["400"]["content"]["application/json"]["schema"]["properties"]["error"]
        # The revocation endpoint answers unsupported_token_type, which the closed enum left out.
        assert "enum" not in error
        for code in ("unsupported_token_type", "temporarily_unavailable", "invalid_client"):
            assert f"`{code}`" in error["description"]


def test_every_operation_with_a_body_documents_413(schema):
    with_body = [
        (method, path, op)
        for method, path, op in operations(schema)
        if "requestBody" in op and not path.startswith("/api/v1/auth/")  # RFC 6749 bodies: tested above
    ]

    assert with_body
    for method, path, operation in with_body:
        response = operation["responses"].get("413")
        assert response is not None, (method, path)
        (example,) = response["content"]["application/problem+json"]["examples"].values()
        assert example["value"]["code"] == "payload_too_large"


def test_the_branch_list_documents_its_errors_and_pagination_headers(schema):
    operation = schema["paths"]["/api/v1/branches"]["get"]

    assert operation["security"] == [{"oauth2": ["appointments:read"]}]
    assert operation["x-required-scope"] == "appointments:read"
    for status in ("400", "401", "403", "429"):
        content = operation["responses"][status]["content"]
        assert list(content) == ["application/problem+json"], status
        assert content["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}, status
    ok = operation["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["type"] == "array"
    assert {"X-Total-Count", "Link", "X-Request-ID"} <= set(ok["headers"])
    assert ok["headers"]["X-Total-Count"]["schema"]["type"] == "integer"
    parameters = {(p["in"], p["name"]) for p in operation["parameters"]}
    assert {("query", "page"), ("query", "per_page"), ("query", "state")} <= parameters


def test_every_operation_documents_the_standard_problem_responses(schema):
    for method, path, operation in operations(schema):
        if path.startswith("/api/v1/auth/"):
            continue
        for status in ("400", "401", "403", "429", "500"):
            assert status in operation["responses"], (method, path, status)


def test_every_post_patch_and_delete_documents_the_idempotency_key_and_its_refusals(schema):
    writes = [
        (m, p, o)
        for m, p, o in operations(schema)
        if m in ("post", "patch", "delete") and not p.startswith("/api/v1/auth/")
    ]
    for method, path, operation in writes:
        headers = [p for p in operation.get("parameters", []) if p["in"] == "header" and p["name"] == "Idempotency-Key"]
        assert len(headers) == 1, (method, path)
        assert headers[0]["required"] is False
        assert headers[0]["schema"]["maxLength"] == 255
        for status in ("409", "422"):
            response = operation["responses"][status]
            assert "application/problem+json" in response["content"], (method, path, status)
        assert "idempotency_key_in_use" in operation["responses"]["409"]["description"]
        assert "idempotency_key_reused" in operation["responses"]["422"]["description"]
        success = [r for status, r in operation["responses"].items() if status.startswith("2")]
        assert success, (method, path)
        assert all("Idempotent-Replayed" in r["headers"] for r in success), (method, path)
    for method, path, operation in operations(schema):
        if method not in ("post", "patch", "delete"):
            assert all(p["name"] != "Idempotency-Key" for p in operation.get("parameters", [])), (method, path)


def test_path_parameters_match_the_path_template(schema):
    for method, path, operation in operations(schema):
        declared = sorted(p["name"] for p in operation.get("parameters", []) if p["in"] == "path")
        assert declared == sorted(re.findall(r"{(\w+)}", path)), (method, path, declared)


def test_every_error_response_outside_auth_is_a_problem(schema):
    for method, path, operation in operations(schema):
        if path.startswith("/api/v1/auth/"):
            continue
        for status, response in operation["responses"].items():
            if status[0] in "45":
                assert list(response["content"]) == ["application/problem+json"], (method, path, status)
                media = response["content"]["application/problem+json"]
                assert media["schema"] == {"$ref": "#/components/schemas/Problem"}, (method, path, status)


def test_the_problem_schema_describes_rfc_9457_bodies(schema):
    problem = schema["components"]["schemas"]["Problem"]

    assert problem["type"] == "object"
    assert set(problem["required"]) == {"type", "title", "status", "code", "request_id"}
    assert {"type", "title", "status", "detail", "code", "request_id", "errors"} <= set(problem["properties"])
    description = problem["properties"]["code"]["description"]
    for code in (
        "validation_error",
        "unknown_parameter",
        "idempotency_key_reused",
        "duplicate_patient",
        "internal_error",
    ):
        assert f"`{code}`" in description, code


def test_the_test_only_endpoints_are_not_in_the_schema(schema):
    assert not any(path.startswith("/api/v1/test/") for path in schema["paths"])


# --- The documentation page -----------------------------------------------------------------------


def referenced_assets(html: str) -> list[str]:
    return re.findall(r'<(?:script|link|img)\b[^>]*?\b(?:src|href)="([^"]+)"', html)


def test_the_docs_page_uses_only_local_assets_and_each_is_served(client):
    response = client.get("/api/v1/docs")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assets = referenced_assets(html)
    assert any(asset.endswith(".js") for asset in assets)
    assert any(asset.endswith(".css") for asset in assets)
    assert not re.search(r"""(?:src|href|url)\s*[=:]\s*["'](?:https?:)?//""", html), "an external asset"
    for asset in assets:
        # The init script comes from the docs view itself (?script), so the page needs no inline script.
        assert asset.startswith("/static/") or asset == "/api/v1/docs?script=", asset
        served = client.get(asset)
        assert served.status_code == 200, asset
        assert b"".join(served.streaming_content if served.streaming else [served.content])
    assert '"/api/v1/schema"' in client.get("/api/v1/docs?script=").content.decode()


def test_the_redoc_page_uses_only_local_assets_and_each_is_served(client):
    response = client.get("/api/v1/redoc")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert not re.search(r"(?:https?:)?//", html), "an external host"
    assert '<redoc spec-url="/api/v1/schema"></redoc>' in html
    assets = referenced_assets(html)
    assert assets == ["/static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"]
    served = client.get(assets[0])
    assert served.status_code == 200
    assert b"".join(served.streaming_content if served.streaming else [served.content])
    assert "script-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.parametrize(
    ("method", "path", "accept", "status", "code"),
    [
        ("post", SCHEMA_URL, "*/*", 405, "method_not_allowed"),
        ("get", SCHEMA_URL, "text/html", 406, "not_acceptable"),
        ("post", "/api/v1/docs", "*/*", 405, "method_not_allowed"),
        ("get", "/api/v1/docs", "application/json", 406, "not_acceptable"),
    ],
)
def test_errors_of_the_schema_and_docs_views_are_json_problems(client, method, path, accept, status, code):
    response = getattr(client, method)(path, HTTP_ACCEPT=accept)

    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert (body["status"], body["code"], body["request_id"]) == (status, code, response["X-Request-ID"])


# --- What generated clients rely on (issue 13, item 7) ------------------------------------------------


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _operation(schema: dict[str, Any], operation_id: str) -> dict[str, Any]:
    (found,) = [op for _, _, op in operations(schema) if op.get("operationId") == operation_id]
    return found


def test_enum_values_have_safe_distinct_names_for_generated_clients(schema):
    blood_group = schema["components"]["schemas"]["BloodGroupEnum"]

    assert blood_group["enum"] == ["A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"]
    assert blood_group["x-enum-varnames"] == [
        "A_POSITIVE",
        "A_NEGATIVE",
        "B_POSITIVE",
        "B_NEGATIVE",
        "AB_POSITIVE",
        "AB_NEGATIVE",
        "O_POSITIVE",
        "O_NEGATIVE",
    ]
    string_enums = [
        n for n in _walk(schema) if isinstance(n.get("enum"), list) and all(isinstance(v, str) for v in n["enum"])
    ]
    assert len(string_enums) > 10
    for node in string_enums:
        names = node["x-enum-varnames"]
        assert len(names) == len(node["enum"]) == len(set(names)), node
        assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", name) for name in names), names


def test_recording_a_payment_declares_the_payment_and_the_invoice_it_returns(schema):
    response = _operation(schema, "billing_invoices_payments_create")["responses"]["201"]
    components = schema["components"]["schemas"]

    assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/PaymentRecorded"}
    recorded = components["PaymentRecorded"]
    assert set(recorded["required"]) == {"payment", "invoice"}
    assert recorded["properties"]["payment"] == {"$ref": "#/components/schemas/Payment"}
    assert set(components["Payment"]["required"]) == {
        "id",
        "amount",
        "payment_mode",
        "reference",
        "payment_date",
        "recorded_at",
    }
    assert set(components["PaidInvoice"]["required"]) == {
        "id",
        "status",
        "paid",
        "credited",
        "net_total",
        "refunded",
        "balance",
        "refund_due",
    }


def test_reschedule_requires_the_new_slot(schema):
    body = _operation(schema, "appointments_reschedule")["requestBody"]
    ref = body["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]

    assert body["required"] is True
    assert set(component["required"]) == {"new_slot_start", "new_slot_end"}
    assert component["properties"]["new_slot_start"]["format"] == "date-time"


def _query(schema: dict[str, Any], operation_id: str) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in _operation(schema, operation_id)["parameters"] if p["in"] == "query"}


def test_the_servers_rules_are_in_the_schema(schema):
    components = schema["components"]["schemas"]
    patients = _query(schema, "patients_list")
    assert patients["page"]["schema"]["minimum"] == 1
    assert (patients["per_page"]["schema"]["minimum"], patients["per_page"]["schema"]["maximum"]) == (1, 100)
    assert patients["search"]["schema"]["minLength"] == 2
    assert patients["branch_id"]["schema"]["format"] == "uuid"
    assert patients["registered_after"]["schema"]["format"] == "date"
    slots = _query(schema, "appointments_slots")
    assert (slots["duration"]["schema"]["minimum"], slots["duration"]["schema"]["maximum"]) == (5, 240)
    assert slots["doctor_id"]["required"] is True
    assert slots["date"]["required"] is True
    assert _query(schema, "appointments_cancel")["reason"]["required"] is True
    create = components["InvoiceCreateRequest"]["properties"]
    assert (create["line_items"]["minItems"], create["line_items"]["maxItems"]) == (1, 100)
    line = components["LineItemInputRequest"]["properties"]
    assert (line["rate"]["type"], line["rate"]["format"], line["rate"]["x-decimal-places"]) == ("number", "decimal", 2)
    assert "multipleOf" not in json.dumps(schema)  # docs/api-rules.md §1.4: validators refuse 36.09 under it
    assert (line["tax_rate"]["minimum"], line["tax_rate"]["maximum"]) == (0, 100)
    for name in ("CashPaymentRequest", "ReferencedPaymentRequest"):
        assert components[name]["properties"]["amount"]["x-decimal-places"] == 2
    for name in ("total", "paid", "balance"):
        assert components["InvoiceSummary"]["properties"][name]["format"] == "decimal"
    patient = components["PatientWriteRequest"]
    assert set(patient["required"]) == {"first_name", "last_name", "date_of_birth", "gender", "phone"}
    assert patient["properties"]["first_name"]["maxLength"] == 100
    assert patient["properties"]["address"] == {"$ref": "#/components/schemas/AddressRequest"}
    pincode = components["AddressRequest"]["properties"]["pincode"]["oneOf"]
    assert {"type": "string", "pattern": "^[1-9][0-9]{5}$"} in pincode


def test_there_is_a_relative_server(schema):
    assert schema["servers"] == [{"url": "/", "description": "This server."}]


def test_every_registered_event_kind_is_a_documented_webhook(schema):
    from integrations.webhooks.registry import event_kind_get, event_kinds

    assert set(schema["webhooks"]) == {kind.name for kind in event_kinds()}
    assert {
        "appointment.booked",
        "appointment.rescheduled",
        "appointment.cancelled",
        "appointment.checked_in",
        "appointment.completed",
        "appointment.no_show",
    } <= set(schema["webhooks"])
    for kind, item in schema["webhooks"].items():
        operation = item["post"]
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header" and p["required"]}
        assert headers == {"webhook-id", "webhook-timestamp", "webhook-signature"}, kind
        envelope = operation["requestBody"]["content"]["application/json"]["schema"]
        assert envelope["required"] == ["id", "type", "timestamp", "data"]
        assert envelope["properties"]["type"]["enum"] == [kind]
        assert envelope["properties"]["timestamp"]["format"] == "date-time"
        data = envelope["properties"]["data"]
        parts = event_kind_get(kind).payload
        assert data["required"] == [part.key for part in parts], kind
        assert {key: value["$ref"] for key, value in data["properties"].items()} == {
            part.key: f"#/components/schemas/{part.component}" for part in parts
        }, kind
        if kind.startswith("appointment."):
            assert data["properties"]["appointment"] == {"$ref": "#/components/schemas/Appointment"}
            assert ("previous" in data["properties"]) is (kind == "appointment.rescheduled"), kind


def test_create_operations_link_to_the_operations_that_take_their_ids(schema):
    expected = {
        "patients_create": ("$response.body#/id", {"patients_retrieve", "patients_partial_update"}),
        "appointments_create": (
            "$response.body#/appointment_id",
            {
                "appointments_retrieve",
                "appointments_reschedule",
                "appointments_cancel",
                "appointments_check_in",
                "appointments_complete",
                "appointments_no_show",
            },
        ),
        "billing_invoices_create": (
            "$response.body#/id",
            {
                "billing_invoices_retrieve",
                "billing_invoices_partial_update",
                "billing_invoices_finalize",
                "billing_invoices_cancel",
                "billing_invoices_payments_create",
            },
        ),
    }
    operation_ids = {op["operationId"] for _, _, op in operations(schema)}
    for source, (expression, targets) in expected.items():
        links = _operation(schema, source)["responses"]["201"]["links"]
        assert set(links) == targets, source
        for target, link in links.items():
            assert link["operationId"] == target in operation_ids
            assert link["parameters"] == {"id": expression}


def test_the_problem_code_is_an_open_string_and_the_extra_members_are_typed(schema):
    problem = schema["components"]["schemas"]["Problem"]
    properties = problem["properties"]

    assert properties["code"]["type"] == "string"
    assert "enum" not in properties["code"]
    assert properties["existing_id"]["format"] == "uuid"
    assert properties["cancellable_until"]["format"] == "date-time"
    for name in ("existing_patient_id", "current_status", "payment_mode", "reference"):
        assert properties[name]["type"] == "string", name
        assert name not in problem["required"]
    assert "example" not in problem


def test_every_error_status_has_its_own_correct_example(schema):
    from clinic.api.errors import PROBLEM_KINDS

    checked = 0
    for method, path, operation in operations(schema):
        if path.startswith("/api/v1/auth/"):
            continue
        for status, response in operation["responses"].items():
            if status[0] not in "45":
                continue
            examples = response["content"]["application/problem+json"]["examples"]
            assert examples, (method, path, status)
            for name, example in examples.items():
                value = example["value"]
                assert value["status"] == int(status), (method, path, status, name)
                assert PROBLEM_KINDS[value["code"]].status == int(status), (method, path, status, name)
                assert value["type"] == f"/api/v1/problems/{value['code']}"
                assert ("errors" in value) is (status == "400")
                checked += 1
    assert checked > 100
    duplicate = _operation(schema, "patients_create")["responses"]["409"]["content"]["application/problem+json"]
    assert {e["value"]["code"] for e in duplicate["examples"].values()} >= {"duplicate_patient"}
    forbidden = _operation(schema, "billing_summary")["responses"]["403"]["content"]["application/problem+json"]
    (value,) = [e["value"] for e in forbidden["examples"].values()]
    assert value["detail"] == "This operation requires the scope billing:read."


def test_list_examples_are_the_array_itself_not_wrapped_in_another(schema):
    lists = 0
    for method, path, operation in operations(schema):
        media = operation["responses"].get("200", {}).get("content", {}).get("application/json", {})
        if media.get("schema", {}).get("type") != "array":
            continue
        lists += 1
        for example in media.get("examples", {}).values():
            assert isinstance(example["value"], list), (method, path)
            assert example["value"], (method, path)
            assert all(isinstance(item, dict) for item in example["value"]), (method, path)
    assert lists == 14  # lab_tests_list, lab_orders_list, the four pharmacy lists, webhooks_subscriptions_list


def test_component_descriptions_do_not_leak_implementation_notes(schema):
    text = json.dumps(schema["components"]["schemas"])
    for leak in ("StrictSerializer", "context=", "partial=True", "Needs context", "doctor_data", "for the OpenAPI"):
        assert leak not in text, leak


def test_status_codes_and_headers_are_declared(schema):
    for method, path, operation in operations(schema):
        for status, response in operation["responses"].items():
            headers = response["headers"]
            assert headers["X-Request-ID"]["required"] is True, (method, path, status)
            assert {"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} <= set(headers), (method, path, status)
            if status in ("429", "503"):
                assert headers["Retry-After"]["required"] is True, (method, path, status)
            if status == "401" and not path.startswith("/api/v1/auth/"):
                assert headers["WWW-Authenticate"]["required"] is True, (method, path)
            if method in ("post", "patch") and not path.startswith("/api/v1/auth/"):
                assert "Idempotent-Replayed" in headers, (method, path, status)
    for operation_id in ("patients_create", "appointments_create", "billing_invoices_create"):
        assert _operation(schema, operation_id)["responses"]["201"]["headers"]["Location"]["required"] is True
    assert "Location" not in _operation(schema, "billing_invoices_payments_create")["responses"]["201"]["headers"]
    slots = _operation(schema, "appointments_slots")["responses"]
    assert "404" in slots
    assert slots["200"]["headers"]["X-Total-Count"]["required"] is True
    for operation_id in (
        "patients_list",
        "appointments_list",
        "billing_invoices_list",
        "branches_list",
        "doctors_list",
        "lab_tests_list",
    ):
        assert {"X-Total-Count", "Link"} <= set(_operation(schema, operation_id)["responses"]["200"]["headers"])
    revoke = schema["paths"]["/api/v1/auth/revoke"]["post"]["responses"]
    assert {"200", "400", "401", "403", "429"} <= set(revoke)
