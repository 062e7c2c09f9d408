"""OpenAPI 3.1 pieces: the OAuth2 client-credentials scheme with each operation's one scope, problem
responses (with an example per status) and headers on every operation, query parameters from the views'
own declarations, money as exact decimals, safe enum names, the token endpoints (plain Django views), the
webhooks of the event registry, and the links from create operations to those that take their ids."""

from __future__ import annotations

import inspect
import re
from decimal import Decimal
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from clinic.api.errors import PROBLEM_KINDS, PROBLEM_MEDIA_TYPE
from clinic.api.params import declared_query_params
from clinic.api.permissions import required_scope
from clinic.api.shapes import shape
from integrations.scopes import SCOPES

SECURITY_SCHEME = "oauth2"


class ClinicAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema with the conventions of this API:

    - the query parameters are those of the view's `query_params` declaration (the serializers that
      validate them, and that ClinicAPIView checks the request against), so documented and accepted
      parameters cannot drift apart;
    - a view with `partial_patch = False` takes a complete body on PATCH (reschedule), not any subset;
    - money and other decimals are JSON numbers: `format: decimal` with `multipleOf` their precision;
    - a component's description is its `openapi_description`, never a developer docstring (inherited
      ones included: every request body would otherwise describe StrictSerializer's internals);
    - an operation's description is its handler's docstring (`list`, `create`, an `@action`, or a plain
      view's `get`), never the class's: a ViewSet's docstring is a note for developers.
    """

    def get_description(self) -> str:  # type: ignore[override] # drf-spectacular's signature
        handler = getattr(self.view, getattr(self.view, "action", None) or self.method.lower(), None)
        doc = getattr(handler, "__doc__", None)
        if not doc:
            return ""
        # A docstring's line breaks are only its width: each paragraph becomes one line of Markdown.
        return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(doc).split("\n\n"))

    def get_override_parameters(self) -> list[Any]:
        return [*declared_query_params(self.view, self.method), *super().get_override_parameters()]

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        if self.method == "PATCH" and not getattr(self.view, "partial_patch", True):
            self.method = "POST"  # drf-spectacular marks every PATCH body partial; this one is not
            try:
                return super()._get_request_for_media_type(serializer, direction)
            finally:
                self.method = "PATCH"
        return super()._get_request_for_media_type(serializer, direction)

    def _get_response_for_code(
        self, serializer: Any, status_code: Any, media_types: Any = None, direction: str = "response"
    ) -> Any:
        # An error response declared by its description only still has a problem body (and so keeps the
        # operation's examples for that status).
        if str(status_code)[0] in "45":
            problem = {"$ref": "#/components/schemas/Problem"}
            if serializer is None:
                serializer = problem
            elif isinstance(serializer, OpenApiResponse) and serializer.response is None:
                serializer = OpenApiResponse(problem, serializer.description, serializer.examples)
        return super()._get_response_for_code(serializer, status_code, media_types, direction)

    def _map_serializer_field(self, field: Any, direction: str, bypass_extensions: bool = False) -> Any:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.ListSerializer | serializers.ListField) and schema.get("type") == "array":
            min_length, max_length = getattr(field, "min_length", None), getattr(field, "max_length", None)
            if min_length is not None:
                schema["minItems"] = min_length
            if max_length is not None:
                schema["maxItems"] = max_length
        if isinstance(field, serializers.DecimalField) and schema.get("type") == "number":
            schema["format"] = "decimal"
            schema["multipleOf"] = float(Decimal(1).scaleb(-(field.decimal_places or 0)))
        return schema

    def _map_basic_serializer(self, serializer: Any, direction: str) -> Any:
        schema = super()._map_basic_serializer(serializer, direction)
        schema.pop("description", None)
        description = type(serializer).__dict__.get("openapi_description")
        if description:
            schema["description"] = description
        return schema


class ApiClientAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "integrations.authentication.ApiClientAuthentication"
    name = SECURITY_SCHEME

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "oauth2",
            "description": "OAuth 2.0 client credentials. Every operation requires exactly one scope.",
            "flows": {"clientCredentials": {"tokenUrl": "/api/v1/auth/token", "scopes": SCOPES}},
        }

    def get_security_requirement(self, auto_schema: Any) -> dict[str, list[str]]:
        return {SECURITY_SCHEME: [required_scope(auto_schema.view, auto_schema.method)]}


def pagination_parameters() -> list[OpenApiParameter]:
    """The response headers that carry a list's totals and links (the `page` and `per_page` query
    parameters come from clinic.api.pagination.PageParams in the view's `query_params`)."""
    return [
        OpenApiParameter(
            "X-Total-Count",
            OpenApiTypes.INT,
            location=OpenApiParameter.HEADER,
            response=[200],
            required=True,
            description="Number of matching items.",
        ),
        OpenApiParameter(
            "Link",
            OpenApiTypes.STR,
            location=OpenApiParameter.HEADER,
            response=[200],
            required=True,
            description='RFC 8288 links with rel="first", "prev", "next" and "last".',
        ),
    ]


def location_header(template: str) -> OpenApiParameter:
    """The `Location` of a 201: the new resource's path."""
    return OpenApiParameter(
        "Location",
        OpenApiTypes.STR,
        location=OpenApiParameter.HEADER,
        response=[201],
        required=True,
        description=f"Path of the new resource: `{template}`.",
    )


def list_responses(item: type) -> dict[int, OpenApiResponse]:
    """200 with a bare JSON array of `item`: a representation (a TypedDict, see clinic.api.shapes) or a
    serializer class."""
    array = item(many=True) if issubclass(item, serializers.BaseSerializer) else shape(item, many=True)
    return {200: OpenApiResponse(array, description="A bare JSON array; totals and links in headers.")}


def path_id(description: str) -> OpenApiParameter:
    """The `{id}` of a detail path, with what it accepts."""
    return OpenApiParameter("id", str, OpenApiParameter.PATH, description=description)


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
    "429": _RETRY_AFTER,
    "503": _RETRY_AFTER,
}


# POST and PATCH go through ClinicAPIView's idempotency layer; integrators need the header and its
# two refusals on the operation itself, not only in the API description.
_IDEMPOTENT_METHODS = ("post", "patch")
_IDEMPOTENCY_KEY_PARAMETER = {
    "in": "header",
    "name": "Idempotency-Key",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
    "description": "Makes a retry safe: the same key and body replay the stored response (kept 24 hours per client).",
}
_IDEMPOTENCY_ERRORS = {
    "409": "`idempotency_key_in_use`: a request with this Idempotency-Key is still running.",
    "422": "`idempotency_key_reused`: this Idempotency-Key was used with a different body.",
}
_REPLAYED_HEADER = {
    "Idempotent-Replayed": {
        "schema": {"type": "string", "enum": ["true"]},
        "description": "Present when the response is the stored outcome of an earlier request with the same key.",
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
                409, "idempotency_key_in_use", "A request with this Idempotency-Key is still being processed."
            )
        },
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


def _token_paths() -> dict[str, Any]:
    oauth_error = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "string",
                "enum": [
                    "invalid_request",
                    "invalid_client",
                    "invalid_scope",
                    "unsupported_grant_type",
                    "access_denied",
                    "rate_limited",
                ],
            },
            "error_description": {"type": "string"},
        },
    }
    error_content = {"application/json": {"schema": oauth_error}}
    credentials = {
        "client_id": {"type": "string", "description": "Or use HTTP Basic authentication (RFC 6749 2.3.1)."},
        "client_secret": {"type": "string", "description": "Or use HTTP Basic authentication."},
    }
    return {
        "/api/v1/auth/token": {
            "post": {
                "operationId": "auth_token",
                "summary": "Exchange client credentials for an access token",
                "description": (
                    "OAuth 2.0 client-credentials grant (RFC 6749 4.4). `scope` asks for a subset of the client's "
                    "allowed scopes; without it the token carries all of them. No refresh token is issued. "
                    "Responses carry `Cache-Control: no-store`. Errors follow RFC 6749 5.2 (not problem+json)."
                ),
                "tags": ["auth"],
                "security": [],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "required": ["grant_type"],
                                "properties": {
                                    "grant_type": {"type": "string", "enum": ["client_credentials"]},
                                    "scope": {"type": "string", "example": "patients:read appointments:read"},
                                    **credentials,
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": {
                        "description": "The access token.",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["access_token", "token_type", "expires_in", "scope"],
                                    "properties": {
                                        "access_token": {"type": "string"},
                                        "token_type": {"type": "string", "enum": ["Bearer"]},
                                        "expires_in": {"type": "integer", "example": 3600},
                                        "scope": {"type": "string", "example": "appointments:read patients:read"},
                                    },
                                },
                                "example": {
                                    "access_token": "k1Jx0Q3a9ZbX7mN2pR5sT8uV",
                                    "token_type": "Bearer",
                                    "expires_in": 3600,
                                    "scope": "patients:read appointments:read",
                                },
                            }
                        },
                    },
                    "400": {
                        "description": "`invalid_request`, `unsupported_grant_type` or `invalid_scope`.",
                        "content": error_content,
                    },
                    "401": {
                        "description": "`invalid_client`: unknown client or wrong secret.",
                        "content": error_content,
                    },
                    "403": {
                        "description": "`access_denied`: address outside the client's allow-list.",
                        "content": error_content,
                    },
                    "429": {"description": "`rate_limited`, with `Retry-After`.", "content": error_content},
                },
            }
        },
        "/api/v1/auth/revoke": {
            "post": {
                "operationId": "auth_revoke",
                "summary": "Revoke an access token (RFC 7009)",
                "description": "A client can revoke only its own tokens; revoking any other token has no effect (still 200).",
                "tags": ["auth"],
                "security": [],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "required": ["token"],
                                "properties": {
                                    "token": {"type": "string"},
                                    "token_type_hint": {"type": "string", "enum": ["access_token"]},
                                    **credentials,
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": {"description": "Revoked, or not a token of this client."},
                    "400": {
                        "description": "`invalid_request` (no token) or `unsupported_token_type`.",
                        "content": error_content,
                    },
                    "401": {"description": "`invalid_client`.", "content": error_content},
                    "403": {
                        "description": "`access_denied`: address outside the client's allow-list.",
                        "content": error_content,
                    },
                    "429": {"description": "`rate_limited`, with `Retry-After`.", "content": error_content},
                },
            }
        },
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


def _webhooks(components: dict[str, Any]) -> dict[str, Any]:
    """Every event kind of the registry (integrations.webhook_models.WebhookEventType), with the body and
    Standard Webhooks headers of its deliveries. `<entity>.<action>` carries `data.<entity>` in the API
    representation (component `<Entity>`); a rescheduling also carries `data.previous`. A new kind whose
    entity has no component fails the schema generation instead of going undocumented."""
    from integrations.webhook_models import WebhookEventType

    headers = [
        ("webhook-id", "The event id: the same on every retry of this event (use it to deduplicate)."),
        ("webhook-timestamp", "Unix seconds of this attempt; reject stale ones."),
        ("webhook-signature", "`v1,<base64 HMAC-SHA256 of id.timestamp.body>`, space-separated per secret."),
    ]
    result: dict[str, Any] = {}
    for kind in WebhookEventType.values:
        entity = kind.split(".", 1)[0]
        component = "".join(part.title() for part in entity.split("_"))
        if component not in components:
            raise LookupError(f"The event {kind} has no payload schema: add a component named {component}.")
        ref = {"$ref": f"#/components/schemas/{component}"}
        data: dict[str, Any] = {"type": "object", "required": [entity], "properties": {entity: ref}}
        if kind.endswith(".rescheduled"):
            data["required"].append("previous")
            data["properties"]["previous"] = {**ref, "description": "The representation before the change."}
        result[kind] = {
            "post": {
                "operationId": "webhook_" + re.sub(r"\W", "_", kind),
                "summary": f"Event {kind}",
                "description": (
                    f"Delivered to every active subscription to `{kind}` (optionally limited to branches), "
                    "signed per Standard Webhooks. A 2xx answer ends the delivery; anything else, or no answer "
                    "in time, is retried on the backoff schedule (a receiver's `Retry-After` is honoured)."
                ),
                "tags": ["webhooks"],
                "security": [],
                "parameters": [
                    {"in": "header", "name": name, "required": True, "schema": {"type": "string"}, "description": text}
                    for name, text in headers
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["id", "type", "timestamp", "data"],
                                "properties": {
                                    "id": {"type": "string", "format": "uuid", "description": "= webhook-id"},
                                    "type": {"type": "string", "enum": [kind]},
                                    "timestamp": {"type": "string", "format": "date-time"},
                                    "data": data,
                                },
                            }
                        }
                    },
                },
                "responses": {
                    "200": {"description": "Received (any 2xx)."},
                    "default": {"description": "Not received: the delivery is retried."},
                },
            }
        }
    return result


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
    "webhooks": "Events delivered to subscribers.",
}


def add_token_endpoints(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Postprocessing hook: standard problem responses (each with its own example) and headers on every
    operation, the problem kinds in the description, the OAuth endpoints that live outside DRF, safe enum
    names, the webhooks and the links."""
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            responses = operation.setdefault("responses", {})
            _unwrap_list_examples(operation)
            if method in _IDEMPOTENT_METHODS:
                operation.setdefault("parameters", []).append(_IDEMPOTENCY_KEY_PARAMETER)
                for status_code, description in _IDEMPOTENCY_ERRORS.items():
                    if status_code in responses:
                        responses[status_code]["description"] += " Or " + description
                    else:
                        responses[status_code] = _problem_response(description)
            if "requestBody" in operation and "415" not in responses:
                responses["415"] = _problem_response("`unsupported_media_type`: send application/json.")
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
                headers = response.setdefault("headers", {})
                headers.update(_COMMON_RESPONSE_HEADERS)
                headers.update(_STATUS_HEADERS.get(status_code, {}))
                if method in _IDEMPOTENT_METHODS:
                    headers.update(_REPLAYED_HEADER)
    token_paths = _token_paths()
    for path_item in token_paths.values():
        for operation in path_item.values():
            for status_code, response in operation["responses"].items():
                response["headers"] = {**_COMMON_RESPONSE_HEADERS, **_STATUS_HEADERS.get(status_code, {})}
                if status_code in ("401", "403"):
                    response["headers"].pop("WWW-Authenticate", None)  # RFC 6749 errors: a JSON body only
    result.setdefault("paths", {}).update(token_paths)
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
    result["webhooks"] = _webhooks(components)
    _links(result)
    _add_enum_varnames(result)
    kinds = "\n".join(f"| `{code}` | {kind.status} | {kind.description} |" for code, kind in PROBLEM_KINDS.items())
    result["info"]["description"] += (
        "\n\n## Problem codes\n\n| code | status | meaning |\n|---|---|---|\n" + kinds + "\n\n"
        "Send `Idempotency-Key` (1-255 characters) on POST and PATCH to make retries safe: the same key and body "
        "replay the stored response with `Idempotent-Replayed: true`; a different body is 422 "
        "`idempotency_key_reused`; a request still running is 409 `idempotency_key_in_use`. Keys are kept 24 hours."
        "\n\nUnknown query parameters are refused with 400 `unknown_parameter` naming each of them, and unknown "
        "body fields with 400 `validation_error` (`errors[].code` = `unknown_field`)."
    )
    return result
