"""The parts of the OpenAPI document that no DRF view describes: the OAuth token endpoints (plain Django
views of django-oauth-toolkit) and the webhooks of the event registry."""

from __future__ import annotations

import re
from typing import Any

OAUTH_ERROR_CODES = (
    "invalid_request",
    "invalid_client",
    "invalid_scope",
    "unsupported_grant_type",
    "unsupported_token_type",
    "access_denied",
    "rate_limited",
    "temporarily_unavailable",
)


# RFC 6749 3.1: the authorization server MUST ignore parameters it does not recognize (unlike the JSON bodies
# of the API, which refuse an unknown field).
_FORM_EXTRA: dict[str, Any] = {"description": "Other parameters are ignored (RFC 6749 3.1)."}


def token_paths() -> dict[str, Any]:
    oauth_error = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                # Not a closed enum (RFC 6749 8.5 lets servers add codes): a generated client must not fail on
                # a code it does not know; treat one by its status.
                "type": "string",
                "description": "RFC 6749 error code: "
                + ", ".join(f"`{code}`" for code in OAUTH_ERROR_CODES)
                + " (more may be added).",
                "examples": ["invalid_client"],
            },
            "error_description": {"type": "string"},
        },
    }
    error_content = {"application/json": {"schema": oauth_error}}
    common_errors = {
        "413": {
            "description": "`invalid_request`: the body is larger than MAX_REQUEST_BODY_BYTES (default 1 MiB).",
            "content": error_content,
        },
        "429": {
            "description": "`rate_limited`, with `Retry-After`: the client's token budget (`TOKEN_RATE_LIMIT` token "
            "requests a minute, apart from its API budget) is spent; or the request did not authenticate its client "
            "and its address is over the anonymous limit (`ANONYMOUS_RATE_LIMIT` a minute). A request with valid "
            "client credentials is never refused for its address.",
            "content": error_content,
        },
        "503": {
            "description": "`temporarily_unavailable`: the database is briefly unreachable; see `Retry-After`.",
            "content": error_content,
        },
    }
    credentials = {
        "client_id": {"type": "string", "description": "Or use HTTP Basic authentication (RFC 6749 2.3.1)."},
        "client_secret": {"type": "string", "description": "Or use HTTP Basic authentication."},
    }
    # SMART Backend Services (docs/fhir.md section 7): RFC 7523 client authentication by a signed JWT.
    assertion = {
        "client_assertion_type": {
            "type": "string",
            "enum": ["urn:ietf:params:oauth:client-assertion-type:jwt-bearer"],
            "description": "With `client_assertion`, instead of a client secret (`private_key_jwt`).",
        },
        "client_assertion": {
            "type": "string",
            "description": "A JWT signed RS384 or ES384 with a key of the client's registered JWKS, its `kid` in "
            "the header; claims `iss` = `sub` = the client id, `aud` = this endpoint's absolute URL, `exp` at "
            "most 5 minutes ahead (60 s of clock skew allowed), and a `jti` never used before by this client.",
        },
    }
    return {
        "/api/v1/auth/token": {
            "post": {
                "operationId": "auth_token",
                "summary": "Exchange client credentials for an access token",
                "description": (
                    "OAuth 2.0 client-credentials grant (RFC 6749 4.4). The client authenticates with its secret "
                    "(HTTP Basic or the form) or, when it registered a JWKS, with a signed client assertion (RFC "
                    "7523 `private_key_jwt`, SMART Backend Services; discovery at "
                    "`/fhir/R4/.well-known/smart-configuration`). An assertion-only client is refused its secret. "
                    "`scope` asks for a subset of the client's allowed scopes; without it the token carries all of "
                    "them. SMART scopes (`system/Patient.rs`, `system/*.read`, ...) map onto the allowed scopes "
                    "that read their types; create, update and delete permissions map to nothing. The response's "
                    "`scope` lists the scopes of this API the token carries. No refresh token is issued. "
                    "Responses carry `Cache-Control: no-store`. Errors follow RFC 6749 5.2 (not problem+json). "
                    "Rate limits: token requests (this endpoint and revocation) have a budget of their own per client "
                    "(`TOKEN_RATE_LIMIT`, default 60 a rolling minute), which the `RateLimit-*` headers report; they "
                    "never spend the client's API budget. A request that does not authenticate its client counts "
                    "against its address's anonymous limit; one with valid credentials is never refused by it."
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
                                "additionalProperties": _FORM_EXTRA,
                                "properties": {
                                    "grant_type": {"type": "string", "enum": ["client_credentials"]},
                                    "scope": {
                                        "type": "string",
                                        "description": "Scopes of this API or SMART `system/` scopes, space-separated.",
                                        "example": "patients:read appointments:read",
                                    },
                                    **credentials,
                                    **assertion,
                                },
                            },
                            "examples": {
                                "client_secret": {
                                    "summary": "Client secret in the form",
                                    "value": {
                                        "grant_type": "client_credentials",
                                        "client_id": "Hk3mZ8qTn2",
                                        "client_secret": "s3cr3t-shown-once",
                                        "scope": "patients:read appointments:read",
                                    },
                                },
                                "private_key_jwt": {
                                    "summary": "SMART Backend Services: a signed client assertion",
                                    "value": {
                                        "grant_type": "client_credentials",
                                        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:"
                                        "jwt-bearer",
                                        "client_assertion": "eyJhbGciOiJSUzM4NCIsImtpZCI6ImtleS0xIiwidHlwIjoiSldUIn0"
                                        ".eyJpc3MiOiJIazNtWjhxVG4yIiwic3ViIjoiSGszbVo4cVRuMiJ9.c2lnbmF0dXJl",
                                        "scope": "system/Patient.rs system/Observation.rs",
                                    },
                                },
                            },
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
                        "description": "`invalid_client`: unknown client, wrong secret, a secret of an assertion-only "
                        "client, or a client assertion refused (algorithm, key, signature, `iss`/`sub`, `aud`, "
                        "`exp`, or a `jti` used before); `error_description` says which.",
                        "content": {
                            "application/json": {
                                "schema": oauth_error,
                                "example": {
                                    "error": "invalid_client",
                                    "error_description": "This client assertion was used already (its jti was "
                                    "seen); sign a new one.",
                                },
                            }
                        },
                    },
                    "403": {
                        "description": "`access_denied`: address outside the client's allow-list.",
                        "content": error_content,
                    },
                    **common_errors,
                },
            }
        },
        "/api/v1/auth/revoke": {
            "post": {
                "operationId": "auth_revoke",
                "summary": "Revoke an access token (RFC 7009)",
                "description": "A client can revoke only its own tokens; revoking any other token has no effect (still 200). "
                "It authenticates as at the token endpoint: its secret, or a client assertion whose `aud` is the "
                "token endpoint's URL.",
                "tags": ["auth"],
                "security": [],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "required": ["token"],
                                "additionalProperties": _FORM_EXTRA,
                                "properties": {
                                    "token": {"type": "string"},
                                    "token_type_hint": {"type": "string", "enum": ["access_token"]},
                                    **credentials,
                                    **assertion,
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
                    **common_errors,
                },
            }
        },
    }


def webhooks(components: dict[str, Any]) -> dict[str, Any]:
    """Every event kind of the registry (integrations.webhooks.registry), with the body and Standard Webhooks
    headers of its deliveries. `data` holds the payload parts the owning app declared, each the API
    representation of an entity (an OpenAPI component). A kind whose component does not exist fails the
    schema generation instead of going undocumented."""
    from integrations.webhooks.registry import event_kinds

    headers = [
        ("webhook-id", "The event id: the same on every retry of this event (use it to deduplicate)."),
        ("webhook-timestamp", "Unix seconds of this attempt; reject stale ones."),
        ("webhook-signature", "`v1,<base64 HMAC-SHA256 of id.timestamp.body>`, space-separated per secret."),
    ]
    result: dict[str, Any] = {}
    for event_kind in event_kinds():
        kind = event_kind.name
        data: dict[str, Any] = {"type": "object", "required": [], "properties": {}}
        for part in event_kind.payload:
            if part.component not in components:
                raise LookupError(f"The event {kind} has no payload schema: no component named {part.component}.")
            ref = {"$ref": f"#/components/schemas/{part.component}"}
            data["required"].append(part.key)
            data["properties"][part.key] = {**ref, "description": part.description} if part.description else ref
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
