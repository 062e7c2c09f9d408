"""OpenAPI 3.1 pieces: the OAuth2 client-credentials scheme with each operation's one scope, problem
responses on every operation, the pagination headers, and the token endpoints (plain Django views)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from clinic.api.errors import PROBLEM_KINDS, PROBLEM_MEDIA_TYPE
from clinic.api.permissions import required_scope
from integrations.scopes import SCOPES

SECURITY_SCHEME = "oauth2"


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
    """The page query parameters and the response headers that carry the totals and links."""
    return [
        OpenApiParameter("page", OpenApiTypes.INT, description="Page number, >= 1 (default 1). Past the end: `[]`."),
        OpenApiParameter("per_page", OpenApiTypes.INT, description="Items per page, 1..100 (default 20)."),
        OpenApiParameter(
            "X-Total-Count",
            OpenApiTypes.INT,
            location=OpenApiParameter.HEADER,
            response=[200],
            description="Number of matching items.",
        ),
        OpenApiParameter(
            "Link",
            OpenApiTypes.STR,
            location=OpenApiParameter.HEADER,
            response=[200],
            description='RFC 8288 links with rel="first", "prev", "next" and "last".',
        ),
    ]


def list_responses(serializer: type[serializers.Serializer]) -> dict[int, OpenApiResponse]:
    return {200: OpenApiResponse(serializer(many=True), description="A bare JSON array; totals and links in headers.")}


PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details.",
    "required": ["type", "title", "status", "code", "request_id"],
    "properties": {
        "type": {"type": "string", "description": "URI of the problem kind: /api/v1/problems/{code}."},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string", "description": "Stable machine-readable code.", "enum": list(PROBLEM_KINDS)},
        "request_id": {"type": "string"},
        "errors": {
            "type": "array",
            "description": "On 400 only: every invalid field.",
            "items": {
                "type": "object",
                "properties": {
                    "field": {"type": ["string", "null"], "description": "Dotted path, e.g. address.pincode."},
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                },
            },
        },
    },
    "example": {
        "type": "/api/v1/problems/validation_error",
        "title": "Invalid input",
        "status": 400,
        "detail": "The request has invalid fields.",
        "code": "validation_error",
        "request_id": "5f0c2a4e9b7d4c1e8a3f6b2d1c0e9f8a",
        "errors": [
            {"field": "per_page", "code": "max_value", "message": "Ensure this value is less than or equal to 100."}
        ],
    },
}

_STANDARD_ERRORS = {
    "400": "Invalid input: `errors` names every bad field or parameter.",
    "401": 'Token missing, invalid, expired or revoked. `WWW-Authenticate: Bearer error="invalid_token"`.',
    "403": "`insufficient_scope` (with `WWW-Authenticate` naming the scope) or `ip_not_allowed`.",
    "429": "`rate_limited`: see `Retry-After` (seconds).",
    "500": "`internal_error`: the body holds only the request id.",
}

_COMMON_RESPONSE_HEADERS = {
    "X-Request-ID": {"schema": {"type": "string"}, "description": "Echo of a valid incoming id, else generated."},
    "RateLimit-Limit": {"schema": {"type": "integer"}, "description": "Requests allowed per rolling minute."},
    "RateLimit-Remaining": {"schema": {"type": "integer"}, "description": "Requests left in the window."},
    "RateLimit-Reset": {"schema": {"type": "integer"}, "description": "Seconds until a request slot frees up."},
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
                    "401": {"description": "`invalid_client`.", "content": error_content},
                },
            }
        },
    }


def add_token_endpoints(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Postprocessing hook: standard problem responses and headers on every operation, the problem
    kinds in the description, and the OAuth endpoints that live outside DRF."""
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            responses = operation.setdefault("responses", {})
            if method in _IDEMPOTENT_METHODS:
                operation.setdefault("parameters", []).append(_IDEMPOTENCY_KEY_PARAMETER)
                for status_code, description in _IDEMPOTENCY_ERRORS.items():
                    if status_code in responses:
                        responses[status_code]["description"] += " Or " + description
                    else:
                        responses[status_code] = _problem_response(description)
            for status_code, description in _STANDARD_ERRORS.items():
                if status_code not in responses:
                    responses[status_code] = _problem_response(description)
            if any(p.get("in") == "path" for p in operation.get("parameters", [])) and "404" not in responses:
                responses["404"] = _problem_response("`not_found`: unknown id, or not visible to this client.")
            for status_code, response in responses.items():
                if status_code[0] in "45" and "content" not in response:
                    # extend_schema(responses={409: OpenApiResponse(description=...)}) leaves out the body.
                    response["content"] = _problem_response("")["content"]
                if status_code.startswith("2"):
                    response.setdefault("headers", {}).update(_COMMON_RESPONSE_HEADERS)
                    if method in _IDEMPOTENT_METHODS:
                        response["headers"].update(_REPLAYED_HEADER)
            scopes = [
                scope for requirement in operation.get("security", []) for scope in requirement.get(SECURITY_SCHEME, [])
            ]
            if scopes:
                operation["x-required-scope"] = scopes[0]
    result.setdefault("paths", {}).update(_token_paths())
    # The code list is read now, not at import: the domain apps register their kinds as their views load.
    problem = {**PROBLEM_SCHEMA, "properties": {**PROBLEM_SCHEMA["properties"]}}
    problem["properties"]["code"] = {**problem["properties"]["code"], "enum": list(PROBLEM_KINDS)}
    result.setdefault("components", {}).setdefault("schemas", {})["Problem"] = problem
    kinds = "\n".join(f"| `{code}` | {kind.status} | {kind.description} |" for code, kind in PROBLEM_KINDS.items())
    result["info"]["description"] += (
        "\n\n## Problem codes\n\n| code | status | meaning |\n|---|---|---|\n" + kinds + "\n\n"
        "Send `Idempotency-Key` (1-255 characters) on POST and PATCH to make retries safe: the same key and body "
        "replay the stored response with `Idempotent-Replayed: true`; a different body is 422 "
        "`idempotency_key_reused`; a request still running is 409 `idempotency_key_in_use`. Keys are kept 24 hours."
    )
    return result
