"""The base ViewSet of every API resource, and the router the apps register their ViewSets on.

A resource is one ViewSet: `list`, `create`, `retrieve`, `partial_update`, `destroy` and its transitions as
`@action`s. It declares, per action, its one scope (`required_scopes`) and its query parameters
(`query_params`); ClinicAPIView supplies idempotency, the refusal of undeclared parameters and unreadable
bodies.

Branch visibility and the audit trail are applied here, so a new action cannot forget them:

- a detail action reads its object with `self.get_object()`, which calls the resource's `selector`, a read
  that takes the calling client (`selector(client=..., ref=...)`): an id the client may not see is the same
  404 as an unknown one, decided in one place;
- a resource that carries patient data sets `patient_data = True`: `get_object()` then names the object's
  patients in the request's audit row (`patients_of`), and every other successful response must have
  named the patients it touched (`audit_patients`, an empty list for an empty page), or the request fails
  loudly (docs/operations.md §3).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, Generic, Protocol, TypeVar, overload

from django.core.exceptions import ImproperlyConfigured
from django.forms.utils import pretty_name
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.utils.formatting import camelcase_to_spaces
from rest_framework.viewsets import ViewSetMixin

from clinic.api.views import ClinicAPIView
from integrations.models import ApiClient

ObjectT = TypeVar("ObjectT")
ReadT = TypeVar("ReadT")
ReadT_co = TypeVar("ReadT_co", covariant=True)


class Selector(Protocol[ReadT_co]):
    """A read of one object through the calling client's branch restriction: `ref` is the path's id as
    sent (a UUID, or a business id such as PAT-000123); unknown, malformed and invisible refs all raise
    clinic.errors.NotFound."""

    def __call__(self, *, client: ApiClient, ref: str) -> ReadT_co: ...


class ClinicRouter(SimpleRouter):
    """Paths without a trailing slash (APPEND_SLASH is off: a redirect would drop a POST body), written as
    Django path() routes (`patients/<str:id>`), the route the audit log records for each request. An id is
    any path segment, so a malformed one reaches the selector and gets the same 404 as an unknown one."""

    def __init__(self) -> None:
        super().__init__(trailing_slash=False, use_regex_path=False)


class ClinicViewSet(ViewSetMixin, ClinicAPIView, Generic[ObjectT]):
    """`class PatientViewSet(ClinicViewSet[Patient]): selector = staticmethod(patient_get)`."""

    lookup_field = "id"
    lookup_value_converter = "str"
    selector: Selector[ObjectT]

    @classmethod
    def as_view(cls, actions: dict[str, Any] | None = None, **initkwargs: Any) -> Any:
        """The view of one route. Its class also declares the route's query parameters by HTTP method, as a
        plain view does (`{"GET": ...}` beside `{"list": ...}`), for what reads the declaration of an
        endpoint's method (tests/clinic/test_unknown_parameters.py compares it with the document)."""
        if "_route_of" in cls.__dict__:
            return super().as_view(actions, **initkwargs)
        by_method = {
            method.upper(): cls.query_params[action]
            for method, action in (actions or {}).items()
            if action in cls.query_params
        }
        route: type[ClinicViewSet[Any]] = type(
            cls.__name__,
            (cls,),
            {
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "query_params": {**cls.query_params, **by_method},
                "_route_of": cls,
            },
        )
        return route.as_view(actions, **initkwargs)

    @overload
    def get_object(self) -> ObjectT: ...

    @overload
    def get_object(self, selector: Selector[ReadT]) -> ReadT: ...

    def get_object(self, selector: Selector[Any] | None = None) -> Any:
        """The object named by the path's id, read through the resource's `selector`, or through another
        client-taking read for an action that shows more of it (the patient profile)."""
        read = selector or getattr(self, "selector", None)
        if read is None:
            raise ImproperlyConfigured(f"{type(self).__name__} declares no selector for get_object().")
        found = read(client=self.api_client, ref=self.kwargs[self.lookup_field])
        if self.patient_data:
            self.audit_patients(self.patients_of(found))
        return found

    def patients_of(self, found: Any) -> Iterable[uuid.UUID]:
        """The patients an object read by get_object() is about: by default its `patient_id` foreign key (an
        appointment's, an invoice's); the patient resource names the patient itself."""
        return [found.patient_id]

    def check_permissions(self, request: Request) -> None:
        # DRF names every OPTIONS request (and its probes of POST and PUT) "metadata". OPTIONS takes the scope
        # of the path's GET (a path without one is a 405, as before), a probe that of its method, as on a plain
        # view (clinic.api.permissions.required_scope): a reader is not offered the write forms.
        if self.action != "metadata":
            return super().check_permissions(request)
        method = (request.method or "OPTIONS").lower()
        # None for a method the path lacks, as DRF itself sets it.
        self.action = self.action_map.get("get" if method == "options" else method)  # type: ignore[assignment]
        try:
            super().check_permissions(request)
        finally:
            self.action = "metadata"

    def get_view_name(self) -> str:
        """The `name` of an OPTIONS answer, as each path had it before the ViewSets (the name of its view
        class): "Patient List Create", "Patient Detail", "Appointment Check In"; an action's own `name=`
        wins."""
        resource = camelcase_to_spaces(type(self).__name__.removesuffix("ViewSet"))
        if self.suffix == "List":
            return f"{resource} List" + (" Create" if "post" in self.action_map else "")
        if self.suffix == "Instance":
            return f"{resource} Detail"
        if self.name and self.name != pretty_name(self.action or ""):
            return str(self.name)
        return f"{resource} {(self.action or '').replace('_', ' ').title()}"

    def get_view_description(self, html: bool = False) -> str:
        return ""  # a ViewSet's docstring is for developers; each operation is described in the document

    def shows_patient_data(self) -> bool:
        return self.patient_data and self.action != "metadata"  # OPTIONS describes the path only

    def operation_name(self) -> str:
        return f"{type(self).__name__}.{self.action}"


def created(body: Any, location: str) -> Response:
    """201 with the new resource's representation and its Location."""
    return Response(body, status=201, headers={"Location": location})
