"""The FHIR R4 endpoints: CapabilityStatement, read, search (Bundle searchset), Patient/{id}/$everything.

The views are DRF views on the REST API's machinery, so a FHIR request is authenticated by the same OAuth
tokens, checked against the same per-client controls (IP allow-list, rate limit) and scopes, restricted to
the same branches (the registry reads through the apps' selectors) and audited in the same log with the
patients it showed, under the REST API's guard (clinic.api.views.AuditGuardedView: a view of patient data
whose 2xx named no patient fails loudly). What differs is the wire: application/fhir+json, and
OperationOutcome for every error (the problem+json the REST handler would have answered is translated,
status and headers kept).
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import AbstractAccessToken
from rest_framework import exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.authentication import request_client
from clinic.api.permissions import HasRequiredScope
from clinic.api.renderers import JSONRenderer, dumps
from clinic.api.views import AuditGuardedView
from integrations.fhir import query, r4, slots
from integrations.fhir.capability import capability_statement
from integrations.fhir.outcome import FHIR_JSON, FhirError, outcome, outcome_response
from integrations.fhir.registry import COMPARTMENT, PATIENT, RESOURCE_TYPES, ResourceType
from integrations.models import ApiClient

logger = logging.getLogger(__name__)


def fhir_response(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    response = HttpResponse(dumps(body), status=status, content_type=f"{FHIR_JSON}; charset=utf-8")
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def base_url(request: HttpRequest | Request) -> str:
    """Absolute, as FHIR wants fullUrl and paging links."""
    return request.build_absolute_uri("/fhir/R4/")


def is_lenient(request: HttpRequest | Request) -> bool:
    prefer = request.headers.get("Prefer", "")
    return any(part.strip().replace(" ", "") == "handling=lenient" for part in prefer.split(";") + prefer.split(","))


def row_patient_id(resource: ResourceType, row: Any) -> Any:
    value = row
    for part in (resource.patient_field or "").split("__"):
        value = getattr(value, part)
    return value


class _AnyAccept(BaseContentNegotiation):
    """The server answers JSON whatever Accept says (FHIR clients send application/fhir+json, the older
    application/json+fhir, or */*); `_format` is checked by the views themselves."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> tuple[BaseRenderer, str]:
        return renderers[0], FHIR_JSON


class _ScopeOrAlternative(HasRequiredScope):
    """The operation's one scope, or for a read any of the view's `alternative_scopes()`."""

    def has_permission(self, request: Request, view: Any) -> bool:
        reads = request.method in ("GET", "HEAD") and request.auth is not None
        if reads and any(view.token_allows(scope) for scope in view.alternative_scopes()):
            return True
        return super().has_permission(request, view)


class FhirView(AuditGuardedView):
    required_scopes: dict[str, str] = {}
    methods: tuple[str, ...] = ("GET",)
    renderer_classes = [JSONRenderer]
    content_negotiation_class = _AnyAccept
    schema = None  # FHIR is described by its CapabilityStatement (/fhir/R4/metadata), not the OpenAPI document

    @property
    def allowed_methods(self) -> list[str]:
        return [*self.methods, "HEAD"] if "GET" in self.methods else list(self.methods)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # A method the path does not offer is 405 with Allow before any token check (docs/api-rules.md §7).
        if request.method not in self.allowed_methods:
            raise exceptions.MethodNotAllowed(request.method or "")
        super().initial(request, *args, **kwargs)

    def handle_exception(self, exc: Exception) -> Response:  # an HttpResponse, as DRF's finalize accepts
        if isinstance(exc, FhirError):
            return cast(Response, outcome_response(exc))
        problem = cast(Response, super().handle_exception(exc))
        data = problem.data if isinstance(problem.data, dict) else {}
        headers = {name: problem[name] for name in ("WWW-Authenticate", "Retry-After") if problem.has_header(name)}
        diagnostics = str(data.get("detail") or data.get("title") or "Error.")
        if problem.status_code >= 500:
            diagnostics = f"Internal error (request {data.get('request_id', '-')})."
        return cast(Response, outcome_response(FhirError(problem.status_code, diagnostics, headers=headers)))

    @property
    def api_client(self) -> ApiClient:
        return request_client(self.request)

    def alternative_scopes(self) -> tuple[str, ...]:
        """Scopes that also grant this view's GET besides `required_scopes` (emr:read for the clinical
        record's types, docs/fhir.md section 1)."""
        return ()

    def get_permissions(self) -> list[Any]:
        # The REST API's permissions (client controls first), with the scope check taking the alternatives.
        return [_ScopeOrAlternative() if type(p) is HasRequiredScope else p for p in super().get_permissions()]

    def token_allows(self, scope: str) -> bool:
        token = cast(AbstractAccessToken | None, self.request.auth)
        return token is not None and token.allow_scopes([scope])

    def token_reads(self, resource: ResourceType) -> bool:
        """Whether the token holds one of the scopes that read `resource`."""
        return any(self.token_allows(scope) for scope in resource.scopes)

    def params(self) -> list[tuple[str, str]]:
        return [(name, value) for name, values in self.request.query_params.lists() for value in values]

    def refuse_parameters(self, accepted: frozenset[str]) -> None:
        params = self.params()
        query.check_format(params)
        unknown = list(dict.fromkeys(name for name, _ in params if name not in accepted | {"_format"}))
        if unknown and not is_lenient(self.request):
            raise FhirError(
                400,
                f"Unknown or unsupported parameter(s): {', '.join(unknown)}.",
                code="not-supported",
                expression=unknown,
            )


class MetadataView(FhirView):
    """GET /fhir/R4/metadata: the CapabilityStatement, no token needed."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def get(self, request: Request) -> HttpResponse:
        self.refuse_parameters(frozenset({"mode"}))
        return fhir_response(r4.check(capability_statement(base_url(request))))


class ResourceView(FhirView):
    resource: ResourceType

    def shows_patient_data(self) -> bool:
        return self.resource.patient_field is not None

    def alternative_scopes(self) -> tuple[str, ...]:
        return self.resource.scopes

    def bundle(
        self, request: Request, entries: list[dict[str, Any]], total: int, links: list[dict[str, str]]
    ) -> dict[str, Any]:
        return {
            "resourceType": "Bundle",
            "id": str(uuid.uuid4()),
            "meta": {"lastUpdated": datetime.now(UTC).isoformat()},
            "type": "searchset",
            "total": total,
            "link": links,
            "entry": entries,
        }

    def entry(self, resource: ResourceType, row: Any, mode: str = "match") -> dict[str, Any]:
        body = resource.to_fhir(row)
        return {
            "fullUrl": f"{base_url(self.request)}{resource.name}/{body['id']}",
            "resource": body,
            "search": {"mode": mode},
        }


class SearchView(ResourceView):
    def get(self, request: Request) -> HttpResponse:
        resource, client = self.resource, self.api_client
        search = query.parse(resource, self.params(), lenient=is_lenient(request))
        rows, total = query.page(client, resource, search)
        entries = [self.entry(resource, row) for row in rows]
        patients = [row_patient_id(resource, row) for row in rows] if resource.patient_field else []
        if "Appointment:patient" in search.includes and rows:
            if not self.token_allows(PATIENT.scope):
                raise exceptions.PermissionDenied(f"_include=Appointment:patient requires the scope {PATIENT.scope}.")
            included = list(PATIENT.rows(client).filter(id__in={row.patient_id for row in rows}).order_by("id"))
            entries += [self.entry(PATIENT, row, "include") for row in included]
            patients += [row.id for row in included]
        if search.ignored:
            warning = outcome(
                f"Ignored unknown or unsupported parameter(s): {', '.join(search.ignored)}.",
                code="not-supported",
                severity="warning",
            )
            entries.append({"resource": warning, "search": {"mode": "outcome"}})
        self.audit_patients(patients)
        bundle = self.bundle(request, entries, total, self.links(search, total))
        return fhir_response(r4.check(bundle))

    def links(self, search: query.SearchRequest, total: int) -> list[dict[str, str]]:
        url = f"{base_url(self.request)}{self.resource.name}"

        def at(offset: int) -> str:
            return f"{url}?{urlencode([*search.used, ('_count', search.count), ('_offset', offset)])}"

        links = [{"relation": "self", "url": at(search.offset)}, {"relation": "first", "url": at(0)}]
        if search.count and search.offset > 0:
            links.append({"relation": "previous", "url": at(max(search.offset - search.count, 0))})
        if search.count and search.offset + search.count < total:
            links.append({"relation": "next", "url": at(search.offset + search.count)})
        return links


class ReadView(ResourceView):
    def get(self, request: Request, id: str) -> HttpResponse:
        self.refuse_parameters(frozenset())
        resource = self.resource
        key = _uuid(id)
        row = resource.rows(self.api_client).filter(pk=key).first() if key else None
        if row is None:
            raise FhirError(404, f"{resource.name}/{id} is not known.")
        if resource.patient_field:
            self.audit_patients([row_patient_id(resource, row)])
        body = r4.check(resource.to_fhir(row))
        headers = {}
        if body.get("meta", {}).get("lastUpdated"):
            headers["ETag"] = f'W/"{body["meta"]["lastUpdated"]}"'
        return fhir_response(body, headers=headers)


class SlotSearchView(FhirView):
    """GET /fhir/R4/Slot: free cells, computed (integrations.fhir.slots); the whole range in one Bundle."""

    required_scopes = {"GET": "appointments:read"}

    def get(self, request: Request) -> HttpResponse:
        self.refuse_parameters(slots.PARAMS)
        found = slots.slot_search(self.api_client, self.params())
        base = base_url(request)
        entries = [
            {"fullUrl": f"{base}Slot/{slot['id']}", "resource": slot, "search": {"mode": "match"}} for slot in found
        ]
        self_link = f"{base}Slot?{urlencode(self.params())}"
        bundle = {
            "resourceType": "Bundle",
            "id": str(uuid.uuid4()),
            "meta": {"lastUpdated": datetime.now(UTC).isoformat()},
            "type": "searchset",
            "total": len(entries),
            "link": [{"relation": "self", "url": self_link}],
            "entry": entries,
        }
        return fhir_response(r4.check(bundle))


class SlotReadView(FhirView):
    required_scopes = {"GET": "appointments:read"}

    def get(self, request: Request, id: str) -> HttpResponse:
        self.refuse_parameters(frozenset())
        return fhir_response(r4.check(slots.slot_read(self.api_client, id)))


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text) if text.isascii() else None
    except ValueError:
        return None


class EverythingView(ResourceView):
    """GET /fhir/R4/Patient/{id}/$everything: the patient and every resource of its compartment that the
    token's scopes cover (a token without lab:read gets no Observations, and no error), as one searchset.
    `_type` narrows the types.

    Paged, as the operation allows: `_count` entries a page (default EVERYTHING_COUNT, at most
    EVERYTHING_MAX_COUNT), `_offset` into the whole, a `next` link while more remain, `total` the whole
    record. A 500-visit patient's record is some 5,000 resources; one COUNT per type finds where the page
    falls, and only the types it covers are read."""

    resource = PATIENT
    required_scopes = {"GET": PATIENT.scope}

    def get(self, request: Request, id: str) -> HttpResponse:
        self.refuse_parameters(frozenset({"_type", "_count", "_offset"}))
        client = self.api_client
        key = _uuid(id)
        patient = PATIENT.rows(client).filter(pk=key).first() if key else None
        if patient is None:
            raise FhirError(404, f"Patient/{id} is not known.")
        params = self.params()
        wanted = everything_types(params)
        count, offset = everything_window(params)
        # The records merged into this one keep their own rows (patients.services.patient_merge): they are
        # part of this patient's record, as in GET /patients/{id}/record. Merges are flattened, one step deep.
        merged = list(PATIENT.rows(client).filter(merged_into=patient).order_by("id"))
        ids = [patient.pk, *(record.pk for record in merged)]
        records = [patient, *merged] if "Patient" in wanted else []
        sections: list[tuple[ResourceType, Any, int]] = [(PATIENT, records, len(records))]
        for resource in COMPARTMENT:
            if resource is PATIENT or resource.name not in wanted or not self.token_reads(resource):
                continue
            rows = resource.rows(client).filter(**{f"{resource.patient_field}__in": ids}).order_by(*resource.order)
            sections.append((resource, rows, rows.count()))
        entries: list[dict[str, Any]] = []
        start, total = offset, sum(size for _, _, size in sections)
        for resource, rows, size in sections:
            if start >= size:
                start -= size
                continue
            want = count - len(entries)
            if want <= 0:
                break
            entries += [self.entry(resource, row) for row in rows[start : start + want]]
            start = 0
        self.audit_patients(ids)
        bundle = self.bundle(request, entries, total, self.everything_links(patient.pk, params, count, offset, total))
        return fhir_response(r4.check(bundle))

    def everything_links(
        self, patient_id: Any, params: list[tuple[str, str]], count: int, offset: int, total: int
    ) -> list[dict[str, str]]:
        url = f"{base_url(self.request)}Patient/{patient_id}/$everything"
        kept = [(name, value) for name, value in params if name == "_type"]

        def at(at_offset: int) -> str:
            return f"{url}?{urlencode([*kept, ('_count', count), ('_offset', at_offset)])}"

        links = [{"relation": "self", "url": at(offset)}, {"relation": "first", "url": at(0)}]
        if offset > 0:
            links.append({"relation": "previous", "url": at(max(offset - count, 0))})
        if offset + count < total:
            links.append({"relation": "next", "url": at(offset + count)})
        return links


EVERYTHING_COUNT = 1000
EVERYTHING_MAX_COUNT = 5000


def everything_window(params: list[tuple[str, str]]) -> tuple[int, int]:
    """(_count, _offset) of a $everything request: 1..EVERYTHING_MAX_COUNT entries, from 0..MAX_OFFSET."""
    count, offset = EVERYTHING_COUNT, 0
    for name, value in params:
        if name == "_count":
            count = query.integer(name, value, 1, EVERYTHING_MAX_COUNT)
        elif name == "_offset":
            offset = query.integer(name, value, 0, query.MAX_OFFSET)
    return count, offset


def everything_types(params: list[tuple[str, str]]) -> set[str]:
    names = {resource.name for resource in COMPARTMENT}
    asked = {name.strip() for key, value in params if key == "_type" for name in value.split(",")}
    unknown = asked - names
    if unknown:
        raise FhirError(
            400, f"_type: not in the Patient compartment here: {', '.join(sorted(unknown))}.", expression=["_type"]
        )
    return asked or names


def _view(base: type[ResourceView], resource: ResourceType) -> Any:
    name = f"{resource.name}{base.__name__}"
    view: type[ResourceView] = type(name, (base,), {"resource": resource, "required_scopes": {"GET": resource.scope}})
    return view.as_view()


SEARCH_VIEWS = {name: _view(SearchView, resource) for name, resource in RESOURCE_TYPES.items()}
READ_VIEWS = {name: _view(ReadView, resource) for name, resource in RESOURCE_TYPES.items()}


@csrf_exempt
def fhir_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Any path under /fhir/ that is no endpoint, whatever the method."""
    return outcome_response(FhirError(404, f"No FHIR endpoint at {request.path}."))
