"""The document-wide OpenAPI postprocessing (drf-spectacular's hook, add_token_endpoints): problem
responses with an example per status and headers on every operation, the idempotency header and its
refusals, the problem codes in the description, the OAuth endpoints and the webhooks
(clinic.api.openapi_paths), safe enum names, and the links from create operations to those that take their
ids."""

from __future__ import annotations

import json
import re
from typing import Any

from clinic.api.errors import PROBLEM_KINDS, PROBLEM_MEDIA_TYPE
from clinic.api.openapi_paths import token_paths, webhooks

SECURITY_SCHEME = "oauth2"


# The members a problem may carry besides the RFC 9457 ones, by the codes that set them. Optional
# properties: a client reads them when present, and a new kind with a new member breaks nothing.
PROBLEM_EXTRA_PROPERTIES: dict[str, dict[str, Any]] = {
    "existing_patient_id": {"type": "string", "description": "`duplicate_patient`: the existing patient's patient_id."},
    "existing_id": {
        "type": "string",
        "format": "uuid",
        "description": "`duplicate_patient`: the existing patient's UUID.",
    },
    "current_status": {"type": "string", "description": "`invalid_state`: the resource's status now."},
    "cancellable_until": {
        "type": "string",
        "format": "date-time",
        "description": "`cancellation_window`: the last moment the API could cancel (branch offset).",
    },
    "allowed_from": {
        "type": "string",
        "format": "date-time",
        "description": "`outside_allowed_time`: the first moment the change is allowed.",
    },
    "allowed_until": {
        "type": "string",
        "format": "date-time",
        "description": "`outside_allowed_time`: the moment it stops being allowed (exclusive).",
    },
    "payment_mode": {"type": "string", "description": "`duplicate_payment`: the mode of the existing payment."},
    "reference": {"type": "string", "description": "`duplicate_payment`: the reference of the existing payment."},
    "drug": {
        "type": "string",
        "description": "`insufficient_stock`, `exceeds_prescription`, `prescription_required`, `not_prescribed`, "
        "`batch_expired`: the drug's code.",
    },
    "available": {"type": "integer", "description": "`insufficient_stock`: the units on hand."},
    "remaining": {"type": "integer", "description": "`exceeds_prescription`: the units the item still allows."},
    "batch": {"type": "string", "description": "`batch_expired`: the batch number."},
    "line_id": {"type": "string", "format": "uuid", "description": "`exceeds_dispensed`: the dispense line."},
    "returnable": {"type": "integer", "description": "`exceeds_dispensed`: the units that may still come back."},
}

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details.",
    "required": ["type", "title", "status", "code", "request_id"],
    "properties": {
        "type": {"type": "string", "description": "URI of the problem kind: /api/v1/problems/{code}."},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string"},
        # Not an enum: a code added later must not break generated clients. The known codes are listed in
        # the description (and in the API description's table).
        "code": {"type": "string", "description": "Stable machine-readable code."},
        "request_id": {"type": ["string", "null"]},
        "errors": {
            "type": "array",
            "description": "On 400 only: every invalid field or query parameter.",
            "items": {
                "type": "object",
                "required": ["field", "code", "message"],
                "properties": {
                    "field": {"type": ["string", "null"], "description": "Dotted path, e.g. address.pincode."},
                    "code": {
                        "type": "string",
                        "description": "e.g. required, invalid, unknown_field, unknown_parameter.",
                    },
                    "message": {"type": "string"},
                },
            },
        },
        **PROBLEM_EXTRA_PROPERTIES,
    },
}

_STANDARD_ERRORS = {
    "400": "Invalid input: `errors` names every bad field or parameter (`validation_error`, `unknown_parameter`).",
    "401": 'Token missing, invalid, expired or revoked. `WWW-Authenticate: Bearer error="invalid_token"`.',
    "403": "`insufficient_scope` (with `WWW-Authenticate` naming the scope) or `ip_not_allowed`.",
    "429": "`rate_limited`: see `Retry-After` (seconds).",
    "500": "`internal_error`: the body holds only the request id.",
    "503": "`service_unavailable`: the database is briefly unreachable; see `Retry-After` (seconds).",
}

_INTEGER = {"type": "integer", "minimum": 0}
# clinic.security_headers: every answer under /api/ but the public documentation paths.
_CACHE_CONTROL = {
    "Cache-Control": {
        "schema": {"type": "string", "enum": ["no-store"]},
        "required": True,
        "description": "Every API answer may carry patient data: no cache may keep it.",
    }
}
# On every response, errors included. The rate-limit headers need an identified client: a request
# refused before (no token, an invalid one) has none of them.
_COMMON_RESPONSE_HEADERS: dict[str, Any] = {
    "X-Request-ID": {
        "schema": {"type": "string"},
        "required": True,
        "description": "Echo of a valid incoming id, else generated.",
    },
    "RateLimit-Limit": {"schema": _INTEGER, "description": "Requests allowed per rolling minute (per client)."},
    "RateLimit-Remaining": {"schema": _INTEGER, "description": "Requests left in the window."},
    "RateLimit-Reset": {"schema": _INTEGER, "description": "Seconds until a request slot frees up."},
}
_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "required": True,
        "description": "Seconds to wait before retrying.",
    }
}
_STATUS_HEADERS: dict[str, dict[str, Any]] = {
    "401": {
        "WWW-Authenticate": {
            "schema": {"type": "string"},
            "required": True,
            "description": 'RFC 6750 challenge, e.g. `Bearer realm="clinic-api", error="invalid_token"`.',
        }
    },
    "403": {
        "WWW-Authenticate": {
            "schema": {"type": "string"},
            "description": 'On `insufficient_scope`: `Bearer error="insufficient_scope", scope="<needed>"`.',
        }
    },
    "405": {
        "Allow": {
            "schema": {"type": "string"},
            "required": True,
            "description": "The methods this path offers, e.g. `GET, POST, HEAD, OPTIONS`.",
        }
    },
    "429": _RETRY_AFTER,
    "503": _RETRY_AFTER,
}

# clinic.api.hygiene refuses a NUL or control character anywhere in the path or a query value (400).
PRINTABLE_PATTERN = r"^[^\x00-\x1F\x7F]*$"


# POST and PATCH go through ClinicAPIView's idempotency layer; integrators need the header and its
# two refusals on the operation itself, not only in the API description.
_IDEMPOTENT_METHODS = ("post", "patch", "delete")
_IDEMPOTENCY_KEY_PARAMETER = {
    "in": "header",
    "name": "Idempotency-Key",
    "required": False,
    # clinic.api.idempotency.validate_key: printable ASCII only (a 400 otherwise).
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[\x20-\x7E]+$"},
    "description": "Makes a retry safe: the same key and body replay the stored response (kept 24 hours per client). "
    "1-255 printable ASCII characters.",
}
_IDEMPOTENCY_ERRORS = {
    "409": "`idempotency_key_in_use`: a request with this Idempotency-Key is still running; see `Retry-After` "
    "(seconds). A request that failed (5xx, or no answer) leaves no reservation: its retry is executed.",
    "422": "`idempotency_key_reused`: this Idempotency-Key was used with a different body or query.",
}
_REPLAYED_HEADER = {
    "Idempotent-Replayed": {
        "schema": {"type": "string", "enum": ["true"]},
        "description": "Present when the response is the stored outcome of an earlier request with the same key.",
    }
}

# Only the idempotency refusal among the 409s carries it (a slot conflict is not worth retrying as such).
_IN_USE_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "description": "On `idempotency_key_in_use`: seconds to wait before retrying with the same key.",
    }
}

EXAMPLE_REQUEST_ID = "5f0c2a4e9b7d4c1e8a3f6b2d1c0e9f8a"


def problem_example(status_code: int, code: str, detail: str | None, **extra: Any) -> dict[str, Any]:
    """A problem body as the server writes it (clinic.api.errors.problem_body)."""
    body: dict[str, Any] = {"type": f"/api/v1/problems/{code}", "title": PROBLEM_KINDS[code].title}
    body["status"] = status_code
    if detail:
        body["detail"] = detail
    body["code"] = code
    body["request_id"] = EXAMPLE_REQUEST_ID
    if status_code == 400:
        body["errors"] = extra.pop("errors", [])
    body.update(extra)
    return body


def _default_problem_examples(status_code: str, operation: dict[str, Any]) -> dict[str, Any]:
    """The example of each standard error status, for an operation that gives none of its own."""
    scope = operation.get("x-required-scope", "patients:read")
    unknown = problem_example(
        400,
        "unknown_parameter",
        "Unknown query parameter: serach.",
        errors=[{"field": "serach", "code": "unknown_parameter", "message": "Unknown query parameter."}],
    )
    invalid = problem_example(
        400,
        "validation_error",
        "The request has invalid fields.",
        errors=[
            {"field": "per_page", "code": "max_value", "message": "Ensure this value is less than or equal to 100."}
        ],
    )
    takes_input = "requestBody" in operation or any(p["in"] == "query" for p in operation.get("parameters", []))
    examples = {
        "400": {"ValidationError": invalid, "UnknownParameter": unknown}
        if takes_input
        else {"UnknownParameter": unknown},
        "401": {"InvalidToken": problem_example(401, "invalid_token", "The access token is invalid.")},
        "403": {
            "InsufficientScope": problem_example(
                403, "insufficient_scope", f"This operation requires the scope {scope}."
            )
        },
        "404": {"NotFound": problem_example(404, "not_found", "Not found.")},
        "409": {
            "IdempotencyKeyInUse": problem_example(
                409, "idempotency_key_in_use", "A request with this Idempotency-Key is still in progress; retry later."
            )
        },
        "405": {"MethodNotAllowed": problem_example(405, "method_not_allowed", "See the Allow header.")},
        "406": {
            "NotAcceptable": problem_example(406, "not_acceptable", "Could not satisfy the request Accept header.")
        },
        "413": {"PayloadTooLarge": problem_example(413, "payload_too_large", "The body is larger than 1048576 bytes.")},
        "415": {
            "UnsupportedMediaType": problem_example(
                415, "unsupported_media_type", 'Unsupported media type "text/plain" in request.'
            )
        },
        "422": {
            "IdempotencyKeyReused": problem_example(
                422, "idempotency_key_reused", "This Idempotency-Key was already used with a different request."
            )
        },
        "429": {"RateLimited": problem_example(429, "rate_limited", "Rate limit exceeded; retry in 12 s.")},
        "500": {"InternalError": problem_example(500, "internal_error", None)},
        "503": {
            "ServiceUnavailable": problem_example(
                503, "service_unavailable", "The database is unavailable; retry shortly."
            )
        },
    }
    return {name: {"value": value} for name, value in examples.get(status_code, {}).items()}


def _problem_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


# Create operations -> the operations that take the new resource's id, as OpenAPI links (so a client,
# or schemathesis's stateful phase, can follow a create with the calls on what it created).
CREATE_LINKS: dict[str, tuple[str, list[str]]] = {
    "patients_create": ("$response.body#/id", ["patients_retrieve", "patients_partial_update"]),
    "appointments_create": (
        "$response.body#/appointment_id",
        [
            "appointments_retrieve",
            "appointments_reschedule",
            "appointments_cancel",
            "appointments_check_in",
            "appointments_complete",
            "appointments_no_show",
        ],
    ),
    "billing_invoices_create": (
        "$response.body#/id",
        [
            "billing_invoices_retrieve",
            "billing_invoices_partial_update",
            "billing_invoices_finalize",
            "billing_invoices_cancel",
            "billing_invoices_payments_create",
        ],
    ),
}


def enum_varname(value: str) -> str:
    """A safe identifier for an enum value: A+ -> A_POSITIVE, AB- -> AB_NEGATIVE, no_show -> NO_SHOW."""
    suffix = {"+": "_POSITIVE", "-": "_NEGATIVE"}.get(value[-1:], "") if len(value) > 1 else ""
    base = value[:-1] if suffix else value
    name = re.sub(r"[^0-9A-Za-z]+", "_", base).strip("_").upper() + suffix
    if not name:
        return "BLANK"
    return f"VALUE_{name}" if name[0].isdigit() else name


def _add_enum_varnames(node: Any) -> None:
    """`x-enum-varnames` on every string enum: generators otherwise derive names that collide (A+ and A-
    both became `A`) and the generated model cannot parse the API's own values."""
    if isinstance(node, dict):
        values = node.get("enum")
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            names = [enum_varname(v) for v in values]
            if len(set(names)) != len(names):
                names = [f"{name}_{index}" for index, name in enumerate(names)]
            node["x-enum-varnames"] = names
        for value in node.values():
            _add_enum_varnames(value)
    elif isinstance(node, list):
        for value in node:
            _add_enum_varnames(value)


def _unwrap_list_examples(operation: dict[str, Any]) -> None:
    """drf-spectacular wraps the examples of a `many=True` response in another list ([[{...}]]); the
    list operations' examples are already the whole array the API returns."""
    for response in operation.get("responses", {}).values():
        for media in response.get("content", {}).values():
            if media.get("schema", {}).get("type") != "array":
                continue
            for example in media.get("examples", {}).values():
                value = example.get("value")
                if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
                    example["value"] = value[0]


def _links(result: dict[str, Any]) -> None:
    operations = {
        op["operationId"]: (path, method, op)
        for path, item in result["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "operationId" in op
    }
    for source, (expression, targets) in CREATE_LINKS.items():
        _, _, operation = operations[source]
        links = operation["responses"]["201"].setdefault("links", {})
        for target in targets:
            path, _, _ = operations[target]
            (parameter,) = re.findall(r"{(\w+)}", path)
            links[target] = {
                "operationId": target,
                "parameters": {parameter: expression},
                "description": f"`{parameter}` of {target} is the `{expression.rsplit('/', 1)[-1]}` of the new resource.",
            }


_TAG_DESCRIPTIONS = {
    "auth": "OAuth 2.0 client credentials: tokens and their revocation.",
    "appointments": "Slots, booking and the appointment lifecycle.",
    "billing": "GST invoices, payments and the financial summary.",
    "branches": "The branches of the network.",
    "doctors": "Doctors and the branches where they consult.",
    "patients": "Registration, search and profiles.",
    "webhooks": "The calling client's webhook subscriptions (scope `webhooks:manage`); the events delivered to "
    "subscribers are listed under `webhooks`.",
}


def _printable(schema: dict[str, Any]) -> None:
    """The control-character rule as a `pattern` on a free-text parameter (an enum, a format or a pattern of its
    own already excludes them)."""
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        _printable(schema["items"])
    elif schema.get("type") == "string" and not {"enum", "format", "pattern"} & schema.keys():
        schema["pattern"] = PRINTABLE_PATTERN


def _defaults_in_words(components: dict[str, Any]) -> None:
    """A request member's default in its description, not as `default`: openapi-typescript (defaultNonNullable)
    makes a member with a `default` required, and an optional member must stay optional in a generated client.
    After drf-spectacular's enum hook, which moves a choice field's description to its enum component."""
    for name, schema in components.items():
        if not name.endswith("Request"):  # COMPONENT_SPLIT_REQUEST: the request bodies and their parts
            continue
        for prop in schema.get("properties", {}).values():
            if "default" in prop:
                default = f"Default: {json.dumps(prop.pop('default'))}."
                prop["description"] = f"{prop['description']} {default}" if prop.get("description") else default


def _method_not_allowed(path_item: dict[str, Any]) -> dict[str, Any]:
    offered = [method.upper() for method in ("get", "post", "put", "patch", "delete") if method in path_item]
    if "GET" in offered:
        offered.append("HEAD")
    return _problem_response(
        f"`method_not_allowed`: this path offers {', '.join(offered)} and OPTIONS; `Allow` lists them "
        "(a request without a valid token is answered 401 first)."
    )


def _not_acceptable(operation: dict[str, Any]) -> dict[str, Any]:
    produced = sorted(
        {
            media_type
            for status_code, response in operation.get("responses", {}).items()
            if status_code[0] == "2"
            for media_type in response.get("content", {"application/json": {}})
        }
        | {"application/json"}
    )
    return _problem_response(
        f"`not_acceptable`: `Accept` names none of {', '.join(produced)} (errors are always problem+json)."
    )


def add_token_endpoints(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Postprocessing hook: standard problem responses (each with its own example) and headers on every
    operation, the problem kinds in the description, the OAuth endpoints that live outside DRF, safe enum
    names, the webhooks and the links."""
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            responses = operation.setdefault("responses", {})
            _unwrap_list_examples(operation)
            for parameter in operation.get("parameters", []):
                if parameter["in"] in ("path", "query"):
                    _printable(parameter.setdefault("schema", {}))
            # DRF negotiates the representation before it authenticates: any Accept it cannot serve is a 406.
            responses.setdefault("406", _not_acceptable(operation))
            responses.setdefault("405", _method_not_allowed(path_item))
            if method in _IDEMPOTENT_METHODS:
                operation.setdefault("parameters", []).append(_IDEMPOTENCY_KEY_PARAMETER)
                for status_code, description in _IDEMPOTENCY_ERRORS.items():
                    if status_code in responses:
                        responses[status_code]["description"] += " Or " + description
                    else:
                        responses[status_code] = _problem_response(description)
            if "requestBody" in operation and "415" not in responses:
                responses["415"] = _problem_response("`unsupported_media_type`: send application/json.")
            if "requestBody" in operation and "413" not in responses:
                responses["413"] = _problem_response(
                    "`payload_too_large`: the body is larger than MAX_REQUEST_BODY_BYTES (default 1 MiB)."
                )
            for status_code, description in _STANDARD_ERRORS.items():
                if status_code not in responses:
                    responses[status_code] = _problem_response(description)
            if any(p.get("in") == "path" for p in operation.get("parameters", [])) and "404" not in responses:
                responses["404"] = _problem_response("`not_found`: unknown id, or not visible to this client.")
            scopes = [
                scope for requirement in operation.get("security", []) for scope in requirement.get(SECURITY_SCHEME, [])
            ]
            if scopes:
                operation["x-required-scope"] = scopes[0]
            for status_code, response in responses.items():
                if status_code[0] in "45":
                    # extend_schema(responses={409: OpenApiResponse(description=...)}) leaves out the body;
                    # examples given for the status (status_codes=["409"]) are kept, else the status's own.
                    media = response.setdefault("content", {}).setdefault(PROBLEM_MEDIA_TYPE, {})
                    for other in [t for t in response["content"] if t != PROBLEM_MEDIA_TYPE]:
                        media.setdefault("examples", {}).update(response["content"].pop(other).get("examples", {}))
                    media["schema"] = {"$ref": "#/components/schemas/Problem"}
                    if not media.get("examples"):
                        media["examples"] = _default_problem_examples(status_code, operation)
                    elif method in _IDEMPOTENT_METHODS and status_code in _IDEMPOTENCY_ERRORS:
                        # The operation's own examples (slot_unavailable, ...) and the idempotency refusal.
                        for name, value in _default_problem_examples(status_code, operation).items():
                            media["examples"].setdefault(name, value)
                headers = response.setdefault("headers", {})
                headers.update(_COMMON_RESPONSE_HEADERS)
                headers.update(_CACHE_CONTROL)
                headers.update(_STATUS_HEADERS.get(status_code, {}))
                if method in _IDEMPOTENT_METHODS:
                    headers.update(_REPLAYED_HEADER)
                    if status_code == "409":
                        headers.update(_IN_USE_RETRY_AFTER)
    paths = token_paths()
    for path_item in paths.values():
        for operation in path_item.values():
            # Another method is refused by the API's own 405 (a problem); Accept is not read (RFC 6749 bodies).
            method_not_allowed = _method_not_allowed(path_item)
            media = method_not_allowed["content"][PROBLEM_MEDIA_TYPE]
            media["examples"] = _default_problem_examples("405", operation)
            operation["responses"]["405"] = method_not_allowed
            for status_code, response in operation["responses"].items():
                response["headers"] = {
                    **_COMMON_RESPONSE_HEADERS,
                    **_CACHE_CONTROL,
                    **_STATUS_HEADERS.get(status_code, {}),
                }
                if status_code in ("401", "403"):
                    response["headers"].pop("WWW-Authenticate", None)  # RFC 6749 errors: a JSON body only
    result.setdefault("paths", {}).update(paths)
    used_tags = sorted({tag for item in result["paths"].values() for op in item.values() for tag in op.get("tags", [])})
    result["tags"] = [{"name": tag, "description": _TAG_DESCRIPTIONS.get(tag, tag.title())} for tag in used_tags]
    # The code list is read now, not at import: the domain apps register their kinds as their views load.
    problem = {**PROBLEM_SCHEMA, "properties": {**PROBLEM_SCHEMA["properties"]}}
    problem["properties"]["code"] = {
        **problem["properties"]["code"],
        "description": "Stable machine-readable code. Known codes (more may be added; treat an unknown one by "
        "its status): " + ", ".join(f"`{code}`" for code in PROBLEM_KINDS) + ".",
    }
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = problem
    _defaults_in_words(components)
    result["webhooks"] = webhooks(components)
    _links(result)
    _add_enum_varnames(result)
    kinds = "\n".join(f"| `{code}` | {kind.status} | {kind.description} |" for code, kind in PROBLEM_KINDS.items())
    result["info"]["description"] += (
        "\n\n## Problem codes\n\n| code | status | meaning |\n|---|---|---|\n" + kinds + "\n\n"
        "Send `Idempotency-Key` (1-255 characters) on POST, PATCH and DELETE to make retries safe: the same key "
        "and request replay the stored response with `Idempotent-Replayed: true`; a different body or query is 422 "
        "`idempotency_key_reused`; a request still running is 409 `idempotency_key_in_use` with `Retry-After`. A "
        "request that failed (5xx, a lost connection) leaves nothing behind: its retry is executed. Keys are kept "
        "24 hours."
        "\n\nUnknown query parameters are refused with 400 `unknown_parameter` naming each of them, and unknown "
        "body fields with 400 `validation_error` (`errors[].code` = `unknown_field`)."
        "\n\nPrinted invoices, credit notes and lab reports are `application/pdf` bodies (`format: binary`), "
        "and the same bytes as `application/octet-stream` for a client that accepts that type (generated "
        "clients that read bytes of that type only, such as openapi-python-client's, need no override)."
        "\n\n## FHIR R4\n\nThe same records are served as FHIR R4 (4.0.1) at `/fhir/R4/`, on the same tokens, "
        "scopes and branch restrictions: read and search, `Patient/{id}/$everything` and Bulk Data `$export`. "
        "That server is described by its CapabilityStatement at `/fhir/R4/metadata` (which points back here), "
        "not in this document."
    )
    # The FHIR server's own description (integrations.fhir.capability). externalDocs.url must be an absolute
    # URI (OpenAPI's format, which Spectral enforces): from the request when the document is served; a
    # document generated offline (`manage.py spectacular`) knows no host and names the path in its text.
    if request is not None:
        url = request.build_absolute_uri("/fhir/R4/metadata")
        result["externalDocs"] = {"description": "FHIR R4 CapabilityStatement", "url": url}
    return result
