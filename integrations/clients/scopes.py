"""The scope registry, and the django-oauth-toolkit scopes backend that limits every client to its own.

The toolkit's default grants every scope to every client; here a token can only ever carry scopes the
administrator allowed for that client.
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.scopes import BaseScopes

SCOPES: dict[str, str] = {
    "patients:read": "Read patient demographics and profiles",
    "patients:write": "Register and update patients",
    "appointments:read": "Read branches, doctors, slots and appointments",
    "appointments:write": "Book, reschedule, cancel and progress appointments",
    "billing:read": "Read invoices and financial summaries",
    "billing:write": "Create and finalize invoices, record payments",
    "lab:read": "Read lab orders and results",
    "lab:write": "Create lab orders and results",
    "pharmacy:read": "Read dispensing and stock",
    "pharmacy:write": "Record dispensing and stock",
    "emr:read": "Read clinical records",
    "webhooks:manage": "Manage the client's own webhook subscriptions",
}

SCOPE_CHOICES = [(name, f"{name}: {description}") for name, description in SCOPES.items()]


class ApiClientScopes(BaseScopes):
    def get_all_scopes(self) -> dict[str, str]:
        return SCOPES

    def get_available_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        return list(application.allowed_scopes) if application is not None else []

    def get_default_scopes(self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any) -> list[str]:
        # No `scope` parameter in the token request: the client gets everything it is allowed.
        return self.get_available_scopes(application, request)
