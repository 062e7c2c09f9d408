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

import hashlib
import logging
import uuid
from datetime import UTC, datetime
from functools import cached_property
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


# What an Accept header may ask for and get JSON: FHIR's type, the older application/json+fhir, plain JSON,
# the NDJSON of Bulk Data files, and wildcards. `application/fhir+xml` alone is 406: the server writes no XML.
JSON_MEDIA = frozenset(
    {
        "*/*",
        "application/*",
        "application/fhir+json",
        "application/json+fhir",
        "application/json",
        "application/fhir+ndjson",
        "application/ndjson",
    }
)


def accepts_json(accept: str) -> bool:
    """Whether an Accept header admits JSON (a range with q=0 is a refusal, not a choice)."""
    for part in accept.split(","):
        media, *parameters = (piece.strip().lower() for piece in part.split(";"))
        refused = any(parameter.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for parameter in parameters)
        if media in JSON_MEDIA and not refused:
            return True
    return False


class _AnyAccept(BaseContentNegotiation):
    """JSON, for every Accept that admits it (FHIR clients send application/fhir+json, the older
    application/json+fhir, or */*; none at all is fine too); anything else, application/fhir+xml above all,
    is 406 with an OperationOutcome in JSON. `_format` is checked by the views themselves."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> tuple[BaseRenderer, str]:
        accept = request.META.get("HTTP_ACCEPT", "").strip()
        if accept and not accepts_json(accept):
            raise FhirError(406, f"Accept {accept[:100]!r}: this server answers application/fhir+json only.")
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
        if problem.status_code >= 500 and problem.status_code != 503:  # a 503 says why (and Retry-After when)
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
        self, request: Request, entries: list[dict[str, Any]], total: int | None, links: list[dict[str, str]]
    ) -> dict[str, Any]:
        return searchset(entries, total, links)

    @cached_property
    def base_url(self) -> str:
        """Once per request: a page of 1,000 entries names it in each fullUrl."""
        return base_url(self.request)

    def entry(
        self, resource: ResourceType, row: Any, mode: str = "match", result: query.ResultParams | None = None
    ) -> dict[str, Any]:
        body = resource.to_fhir(row)
        return {
            "fullUrl": f"{self.base_url}{resource.name}/{body['id']}",
            "resource": result.subset(body) if result else body,
            "search": {"mode": mode},
        }


def searchset(entries: list[dict[str, Any]], total: int | None, links: list[dict[str, str]]) -> dict[str, Any]:
    """A Bundle searchset; without `total` under `_total=none`."""
    bundle: dict[str, Any] = {
        "resourceType": "Bundle",
        "id": str(uuid.uuid4()),
        "meta": {"lastUpdated": datetime.now(UTC).isoformat()},
        "type": "searchset",
    }
    if total is not None:
        bundle["total"] = total
    bundle.update(link=links, entry=entries)
    return bundle


def page_links(url: str, result: query.ResultParams, more: bool) -> list[dict[str, str]]:
    """self, first, previous and next: each with the parameters applied, `_count` as applied (a capped
    one as capped) and its `_offset`."""

    def at(offset: int) -> str:
        return f"{url}?{urlencode([*result.used, ('_count', result.count), ('_offset', offset)])}"

    links = [{"relation": "self", "url": at(result.offset)}, {"relation": "first", "url": at(0)}]
    if result.count and result.offset > 0:
        links.append({"relation": "previous", "url": at(max(result.offset - result.count, 0))})
    if result.count and more:
        links.append({"relation": "next", "url": at(result.offset + result.count)})
    return links


class SearchView(ResourceView):
    def get(self, request: Request) -> HttpResponse:
        resource, client = self.resource, self.api_client
        search = query.parse(resource, self.params(), lenient=is_lenient(request))
        found = query.page(client, resource, search)
        rows = found.rows
        entries = [self.entry(resource, row, result=search) for row in rows]
        patients = [row_patient_id(resource, row) for row in rows] if resource.patient_field else []
        if "Appointment:patient" in search.includes and rows:
            if not self.token_allows(PATIENT.scope):
                raise exceptions.PermissionDenied(f"_include=Appointment:patient requires the scope {PATIENT.scope}.")
            included = list(PATIENT.rows(client).filter(id__in={row.patient_id for row in rows}).order_by("id"))
            entries += [self.entry(PATIENT, row, "include", search) for row in included]
            patients += [row.id for row in included]
        if search.ignored:
            warning = outcome(
                f"Ignored unknown or unsupported parameter(s): {', '.join(search.ignored)}.",
                code="not-supported",
                severity="warning",
            )
            entries.append({"resource": warning, "search": {"mode": "outcome"}})
        self.audit_patients(patients)
        links = page_links(f"{base_url(self.request)}{resource.name}", search, found.more)
        return fhir_response(r4.check(self.bundle(request, entries, found.total, links)))


class ReadView(ResourceView):
    def get(self, request: Request, id: str) -> HttpResponse:
        resource = self.resource
        result = read_params(self, resource.name)
        key = _uuid(id)
        row = resource.rows(self.api_client).filter(pk=key).first() if key else None
        if row is None:
            raise FhirError(404, f"{resource.name}/{id} is not known.")
        if resource.patient_field:
            self.audit_patients([row_patient_id(resource, row)])
        return read_response(request, resource.to_fhir(row), result)


def read_params(view: FhirView, resource_type: str) -> query.ResultParams:
    """A read takes `_summary` (true, data, false) and `_elements`, as the specification's read does."""
    params = view.params()
    view.refuse_parameters(frozenset({"_summary", "_elements"}))
    result = query.ResultParams()
    for name, value in params:
        if name == "_summary" and value == "count":
            raise query.bad(name, "count is for searches; a read is one resource.")
        if name in ("_summary", "_elements"):
            query.result_param(result, resource_type, name, value)
    return result


def etag(body: bytes) -> str:
    """A weak validator of the representation: its digest. The server keeps no version ids; a digest
    changes with whatever the resource shows (a related doctor's renamed display too), which a timestamp of
    the row alone would miss."""
    return f'W/"{hashlib.sha256(body).hexdigest()[:32]}"'


def read_response(request: Request, resource: dict[str, Any], result: query.ResultParams) -> HttpResponse:
    """The resource with its ETag; 304 and no body when If-None-Match holds that ETag (or `*`)."""
    body = dumps(r4.check(result.subset(resource)))
    tag = etag(body)
    wanted = [part.strip() for part in request.headers.get("If-None-Match", "").split(",") if part.strip()]
    if "*" in wanted or tag.removeprefix("W/") in {value.removeprefix("W/") for value in wanted}:
        response = HttpResponse(status=304)
        response["ETag"] = tag
        return response
    response = HttpResponse(body, content_type=f"{FHIR_JSON}; charset=utf-8")
    response["ETag"] = tag
    return response


class SlotSearchView(FhirView):
    """GET /fhir/R4/Slot: free cells, computed (integrations.fhir.slots), paged like every search."""

    required_scopes = {"GET": "appointments:read"}

    def get(self, request: Request) -> HttpResponse:
        self.refuse_parameters(slots.PARAMS | query.RESULT_PARAMS - {"_include"})
        found = slots.slot_page(self.api_client, self.params())
        base, result = base_url(request), found.result
        entries = [
            {"fullUrl": f"{base}Slot/{slot['id']}", "resource": slot, "search": {"mode": "match"}}
            for slot in found.slots
        ]
        total = None if result.total == "none" else found.total
        more = not result.count_only and result.offset + result.count < found.total
        links = page_links(f"{base}Slot", result, more)
        return fhir_response(r4.check(searchset(entries, total, links)))


class SlotReadView(FhirView):
    required_scopes = {"GET": "appointments:read"}

    def get(self, request: Request, id: str) -> HttpResponse:
        result = read_params(self, "Slot")
        return read_response(request, slots.slot_read(self.api_client, id), result)


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text) if text.isascii() else None
    except ValueError:
        return None


class EverythingView(ResourceView):
    """GET /fhir/R4/Patient/{id}/$everything: the patient and every resource of its compartment that the
    token's scopes cover (a token without lab:read gets no Observations, and no error), as one searchset.
    The operation's parameters (query.parse_everything): `start` and `end` (care dates), `_since` (last
    updated), `_type` (the types), `_count` and `_offset`.

    Paged, as the operation allows: `_count` entries a page (default EVERYTHING_COUNT, capped at
    EVERYTHING_MAX_COUNT), `_offset` into the whole, a `next` link while more remain, `total` the whole
    record. A 500-visit patient's record is some 5,000 resources; one COUNT per type finds where the page
    falls, and only the types it covers are read."""

    resource = PATIENT
    required_scopes = {"GET": PATIENT.scope}

    def get(self, request: Request, id: str) -> HttpResponse:
        self.refuse_parameters(query.EVERYTHING_PARAMS)
        client = self.api_client
        key = _uuid(id)
        patient = PATIENT.rows(client).filter(pk=key).first() if key else None
        if patient is None:
            raise FhirError(404, f"Patient/{id} is not known.")
        asked = query.parse_everything(self.params(), [resource.name for resource in COMPARTMENT])
        wanted, count, offset = asked.types, asked.result.count, asked.result.offset
        # The records merged into this one keep their own rows (patients.services.patient_merge): they are
        # part of this patient's record, as in GET /patients/{id}/record. Merges are flattened, one step deep.
        merged = list(PATIENT.rows(client).filter(merged_into=patient).order_by("id"))
        ids = [patient.pk, *(record.pk for record in merged)]
        records = [patient, *merged] if "Patient" in wanted else []
        if records and asked.since is not None:  # the records themselves are in only if updated since
            updated = set(asked.narrow(PATIENT, PATIENT.rows(client).filter(pk__in=ids)).values_list("pk", flat=True))
            records = [record for record in records if record.pk in updated]
        sections: list[tuple[ResourceType, Any, int]] = [(PATIENT, records, len(records))]
        for resource in COMPARTMENT:
            if resource is PATIENT or resource.name not in wanted or not self.token_reads(resource):
                continue
            rows = resource.rows(client).filter(**{f"{resource.patient_field}__in": ids}).order_by(*resource.order)
            rows = asked.narrow(resource, rows)
            sections.append((resource, rows, rows.count()))
        entries: list[dict[str, Any]] = []
        start, total = offset, sum(size for _, _, size in sections)
        for resource, rows, size in [] if asked.result.count_only else sections:
            if start >= size:
                start -= size
                continue
            want = count - len(entries)
            if want <= 0:
                break
            entries += [self.entry(resource, row) for row in rows[start : start + want]]
            start = 0
        self.audit_patients(ids)
        url = f"{base_url(self.request)}Patient/{patient.pk}/$everything"
        asked.result.used = asked.kept
        links = page_links(url, asked.result, not asked.result.count_only and offset + count < total)
        return fhir_response(r4.check(self.bundle(request, entries, total, links)))


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
