"""Scope enforcement: every operation declares exactly one required scope on its view."""

from __future__ import annotations

from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from oauth2_provider.models import AbstractAccessToken
from rest_framework import exceptions
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

REALM = "clinic-api"


class InsufficientScope(exceptions.PermissionDenied):
    problem_code = "insufficient_scope"

    def __init__(self, scope: str) -> None:
        super().__init__(f"This operation requires the scope {scope}.")
        self.extra_headers = {
            "WWW-Authenticate": f'Bearer realm="{REALM}", error="insufficient_scope", scope="{scope}"'
        }


def required_scope(view: Any, method: str) -> str:
    """The scope of the operation `method` on `view`: a ViewSet keys `required_scopes` by action
    (`{"list": ..., "create": ..., "cancel": ...}`), a plain view by method (`{"GET": ..., "POST": ...}`)."""
    scopes: dict[str, str] | None = getattr(view, "required_scopes", None)
    if not scopes:
        raise ImproperlyConfigured(f"{type(view).__name__} declares no required_scopes.")
    action = getattr(view, "action", None)
    if action and action in scopes:
        return scopes[action]
    method = "GET" if method in ("HEAD", "OPTIONS") else method
    try:
        return scopes[method]
    except KeyError:
        # A method the view implements must have a scope; one it does not is DRF's 405.
        if hasattr(view, method.lower()):
            raise ImproperlyConfigured(f"{type(view).__name__} has no required scope for {method}.") from None
        raise exceptions.MethodNotAllowed(method) from None


class HasRequiredScope(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        token = cast(AbstractAccessToken | None, request.auth)
        if token is None:
            return False
        scope = required_scope(view, request.method or "GET")
        if not token.allow_scopes([scope]):
            raise InsufficientScope(scope)
        return True
