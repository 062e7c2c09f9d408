"""The base ViewSet of every API resource, and the router the apps register their ViewSets on.

A resource is one ViewSet: `list`, `create`, `retrieve`, `partial_update`, `destroy` and its transitions as
`@action`s. It declares, per action, its one scope (`required_scopes`) and its query parameters
(`query_params`); ClinicAPIView supplies idempotency, the refusal of undeclared parameters and unreadable
bodies. A resource that carries patient data sets `patient_data = True`: every successful response must
then have named the patients it touched (`audit_patients`, an empty list for an empty page), or the request
fails loudly, so a new operation cannot forget the audit trail (CONTRACT section 10).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.viewsets import ViewSetMixin

from clinic.api import idempotency
from clinic.api.views import ClinicAPIView


class ClinicRouter(SimpleRouter):
    """Paths without a trailing slash (APPEND_SLASH is off: a redirect would drop a POST body); ids are any
    path segment, so a malformed one reaches the selector and gets the same 404 as an unknown one."""

    def __init__(self) -> None:
        super().__init__(trailing_slash=False)


class ClinicViewSet(ViewSetMixin, ClinicAPIView):
    lookup_field = "id"
    lookup_value_regex = "[^/]+"
    patient_data = False

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Response:
        replayed = response.has_header(idempotency.REPLAYED_HEADER)  # the handler did not run again
        if self.patient_data and 200 <= response.status_code < 300 and not replayed and not self.patients_audited:
            raise ImproperlyConfigured(
                f"{type(self).__name__}.{self.action} answered patient data without audit_patients()."
            )
        return super().finalize_response(request, response, *args, **kwargs)


def created(body: Any, location: str) -> Response:
    """201 with the new resource's representation and its Location."""
    return Response(body, status=201, headers={"Location": location})
