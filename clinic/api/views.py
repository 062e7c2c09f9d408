"""The base class of every API view: DRF's dispatch plus Idempotency-Key handling for POST, PATCH and DELETE, and
the refusal of query parameters the operation does not declare (docs/api-rules.md §1); and the audit guard
that the REST API and the FHIR server share (AuditGuardedView)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any, cast
from uuid import UUID

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponseBase
from rest_framework import serializers
from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clinic.api import idempotency
from clinic.api.authentication import request_client
from clinic.api.context import request_context
from clinic.api.errors import UnknownParameter
from clinic.api.pagination import FilterNamesNothing
from clinic.api.params import declared_query_params
from clinic.api.schema import ClinicAutoSchema
from integrations.models import ApiClient

IDEMPOTENT_METHODS = frozenset({"POST", "PATCH", "DELETE"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@cache
def accepted_parameters(declared: tuple[type[serializers.Serializer], ...]) -> frozenset[str]:
    return frozenset(name for serializer in declared for name, _field in serializer().fields.items())


class AuditGuardedView(APIView):
    """A view that shows patient data sets `patient_data = True` and names, in its request's audit row, the
    patients each successful answer showed (`audit_patients`; an empty list for an empty page). A 2xx that
    named none fails loudly instead of leaving an audit row that a search by patient would miss
    (docs/operations.md §3). The REST API's views and the FHIR server's both stand on it."""

    patient_data = False

    def audit_patients(self, ids: Iterable[UUID]) -> None:
        """Record in this request's audit row which patients it touched (each once)."""
        context = request_context(self.request)
        context.patient_ids = list(dict.fromkeys([*(context.patient_ids or []), *ids]))

    @property
    def patients_audited(self) -> bool:
        return request_context(self.request).patient_ids is not None

    def shows_patient_data(self) -> bool:
        return self.patient_data

    def operation_name(self) -> str:
        return f"{type(self).__name__}.{(self.request.method or '').lower()}"

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Response:
        replayed = response.has_header(idempotency.REPLAYED_HEADER)  # the handler did not run again
        answered = 200 <= response.status_code < 300 and not replayed
        if answered and self.shows_patient_data() and not self.patients_audited:
            raise ImproperlyConfigured(f"{self.operation_name()} answered patient data without audit_patients().")
        return super().finalize_response(request, response, *args, **kwargs)


class ClinicAPIView(AuditGuardedView):
    """Subclasses declare `required_scopes = {"GET": "<scope>", ...}`: exactly one scope per operation, and
    `query_params = {"GET": (PageParams, FooListParams)}`: the serializers that validate each method's query
    parameters. That one declaration decides which parameters are accepted (any other is a 400
    `unknown_parameter`: a typo such as `?serach=` must not silently return everything) and is what the
    OpenAPI document lists (ClinicAutoSchema), so the two cannot drift apart. A method not named takes none.
    """

    required_scopes: dict[str, str] = {}
    query_params: dict[str, tuple[type[serializers.Serializer], ...]] = {}
    schema = ClinicAutoSchema()

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # DRF's APIView.dispatch, with the handler run through the idempotency layer when asked for.
        self.args, self.kwargs = args, kwargs
        drf_request = self.initialize_request(request, *args, **kwargs)
        self.request = drf_request
        self.headers = self.default_response_headers
        try:
            self.initial(drf_request, *args, **kwargs)
            self._refuse_unknown_parameters(drf_request)
            self._refuse_empty_parameters(drf_request)
            self._refuse_unreadable_body(drf_request)
            key = drf_request.headers.get(idempotency.HEADER)
            if key is not None and drf_request.method in IDEMPOTENT_METHODS:
                response: HttpResponseBase = idempotency.execute(
                    client=request_client(drf_request),
                    key=key,
                    request=drf_request,
                    handler=lambda: self._handle(drf_request, *args, **kwargs),
                )
            else:
                response = self._call_handler(drf_request, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - DRF's contract: every exception becomes a response
            response = self.handle_exception(exc)
        # finalize_response handles plain HttpResponses too (an idempotent replay is one).
        self.response = self.finalize_response(drf_request, cast(Response, response), *args, **kwargs)
        return self.response

    def _refuse_unknown_parameters(self, request: Request) -> None:
        """400 naming every query parameter the operation does not declare, before the handler runs (so a
        refused request changes nothing and records no idempotency key). HEAD takes GET's parameters."""
        accepted = accepted_parameters(declared_query_params(self, request.method or "GET"))
        unknown = [name for name in request.query_params if name not in accepted]
        if unknown:
            raise UnknownParameter(
                "Unknown query parameter" + ("s: " if len(unknown) > 1 else ": ") + ", ".join(unknown) + ".",
                errors=[
                    {"field": name, "code": "unknown_parameter", "message": "Unknown query parameter."}
                    for name in unknown
                ],
            )

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, FilterNamesNothing):
            # Not a refusal: a filter naming an id the client may see nothing of answers the empty list
            # (docs/api-rules.md §5.4), whether the id exists at another branch or nowhere.
            self.audit_patients([])
            return exc.pagination.response([])
        return super().handle_exception(exc)

    def _refuse_empty_parameters(self, request: Request) -> None:
        """400 naming every query parameter sent with an empty (or blank) value (docs/api-rules.md §5.5): a
        client whose variable was unset (`?patient_id=`) must not read the unfiltered list."""
        empty = sorted(
            {name for name, values in request.query_params.lists() if any(not value.strip() for value in values)}
        )
        if empty:
            raise serializers.ValidationError(
                {name: [serializers.ErrorDetail("Must not be empty.", code="blank")] for name in empty}
            )

    def _refuse_unreadable_body(self, request: Request) -> None:
        """415 for a body no parser reads, decided before the handler (and any idempotency record).

        DRF would notice only when parsing; but the toolkit reads `request.POST` while authenticating,
        which drains a multipart body, and DRF then parses it as an empty form: the caller got "name is
        required" for a body that had a name, instead of 415.
        """
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if (
            request.method in BODY_METHODS
            and length > 0
            and self.get_content_negotiator().select_parser(request, self.get_parsers()) is None
        ):
            raise UnsupportedMediaType(request.content_type)

    def _call_handler(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        method = (request.method or "").lower()
        handler = getattr(self, method, self.http_method_not_allowed) if method in self.http_method_names else None
        return (handler or self.http_method_not_allowed)(request, *args, **kwargs)

    def _handle(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The handler's outcome as a response, errors included, so a 4xx can be stored and replayed."""
        try:
            response = self._call_handler(request, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            response = self.handle_exception(exc)
        return response  # type: ignore[return-value]

    @property
    def api_client(self) -> ApiClient:
        """The calling API client (views run only after authentication succeeded)."""
        return request_client(self.request)
