"""SMART Backend Services (SMART App Launch 2.x) on this server (docs/fhir.md section 7): the discovery
document, and the SMART scopes a token request may ask for, mapped onto ours.

Our scopes are per area (`lab:read` reads ServiceRequest, Observation and DiagnosticReport alike) and do not
tell read from search, so a SMART scope grants the area scope that reads its type: `system/Observation.rs`
gives `lab:read`, or `emr:read` for a client allowed that and not `lab:read` (the clinical record reads lab
and medication types too, docs/fhir.md section 1). A scope only ever maps onto scopes the client is
allowed. Create, update and delete (`c`, `u`, `d`, v1 `write`) map to nothing: the FHIR server is read-only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from integrations.clients.assertions import ALGORITHMS
from integrations.clients.scopes import SCOPES
from integrations.fhir.registry import RESOURCE_TYPES

# Every type the server reads, with the scopes that read it, the type's own first (docs/fhir.md section 1).
# Slot is computed by the views rather than registered, and reads with the appointments.
TYPE_SCOPES: dict[str, tuple[str, ...]] = {
    **{name: resource.scopes for name, resource in RESOURCE_TYPES.items()},
    "Slot": ("appointments:read",),
}

# system/<Type or *>.<permissions>: v1 `read`, `write`, `*`; v2 a non-empty subset of `cruds`, in that order.
_SMART_SCOPE = re.compile(r"^system/(?P<type>\*|[A-Za-z]+)\.(?P<permissions>read|write|\*|c?r?u?d?s?)$")
_CONTEXTS = ("system/", "patient/", "user/")


class ScopeRefused(ValueError):
    """The requested scopes cannot be granted (`invalid_scope`); the message says why."""


def is_smart_scope(scope: str) -> bool:
    return scope.startswith(_CONTEXTS)


def _reads(permissions: str) -> bool:
    if permissions in ("read", "write", "*"):  # SMART v1
        return permissions != "write"
    return "r" in permissions or "s" in permissions


def _scope_for(type_name: str, client_scopes: Sequence[str]) -> str | None:
    return next((scope for scope in TYPE_SCOPES.get(type_name, ()) if scope in client_scopes), None)


def scopes_grant(requested: Sequence[str], allowed: Sequence[str]) -> list[str]:
    """Our scopes for a token request: ours kept as asked (the token endpoint checks them against the client's),
    each SMART `system/` scope replaced by the allowed scopes that read its types."""
    granted: list[str] = []
    asked_smart = False
    for scope in requested:
        if not is_smart_scope(scope):
            granted.append(scope)
            continue
        asked_smart = True
        if "?" in scope:
            raise ScopeRefused(f"{scope!r}: SMART scopes narrowed by a query are not supported.")
        match = _SMART_SCOPE.match(scope)
        if match is None or not match["permissions"]:
            raise ScopeRefused(
                f"{scope!r} is not a SMART Backend Services scope: use system/<Type>.rs (v2), system/<Type>.read "
                "(v1), or * for every type."
            )
        if not _reads(match["permissions"]):
            continue  # c, u, d only: nothing to grant on a read-only server
        types = list(TYPE_SCOPES) if match["type"] == "*" else [match["type"]]
        granted.extend(scope for scope in (_scope_for(name, allowed) for name in types) if scope)
    if asked_smart and not granted:
        raise ScopeRefused(
            "None of the requested SMART scopes maps onto a scope this client is allowed; the server grants "
            "read access only."
        )
    return list(dict.fromkeys(granted))


def scopes_supported() -> list[str]:
    """What the discovery document lists: ours, then SMART's v2 and v1 forms for every type and `*`."""
    types = ["*", *TYPE_SCOPES]
    return [
        *SCOPES,
        *(f"system/{name}.rs" for name in types),
        *(f"system/{name}.read" for name in types),
    ]


def smart_configuration(request: HttpRequest) -> dict[str, Any]:
    return {
        "token_endpoint": request.build_absolute_uri(reverse("auth-token")),
        "revocation_endpoint": request.build_absolute_uri(reverse("auth-revoke")),
        "token_endpoint_auth_methods_supported": ["private_key_jwt", "client_secret_basic", "client_secret_post"],
        "token_endpoint_auth_signing_alg_values_supported": list(ALGORITHMS),
        "grant_types_supported": ["client_credentials"],
        "scopes_supported": scopes_supported(),
        "capabilities": [
            "client-confidential-asymmetric",
            "client-confidential-symmetric",
            "permission-v1",
            "permission-v2",
        ],
    }


@require_safe
def smart_configuration_view(request: HttpRequest) -> HttpResponse:
    """GET /fhir/R4/.well-known/smart-configuration: public, no token."""
    return JsonResponse(smart_configuration(request))
