"""Audit of staff reading patient data in the admin (docs/api-rules.md §7).

Every admin page that shows a patient's data writes exactly one AuditLogEntry: actor `staff:<user>`, no
API client, and the UUIDs of the patients the page showed, in the order shown. A ModelAdmin opts in with
PatientDataAuditMixin (first among its bases) and, when its objects do not carry `patient_id`, a
`patient_ids_of(obj)` hook. The objects are read from the view's TemplateResponse context before it is
rendered (the same evaluated querysets the template then uses: no extra query), or, for a save that
redirects, from the object just saved. A page that shows no patient (an empty list, an add form, a
refusal) writes nothing.

The row is written inside the request, before the page is sent: if it cannot be written the page fails
instead of being shown unaudited.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.contrib.admin import helpers
from django.contrib.admin.utils import unquote
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.response import TemplateResponse
from django.utils import timezone

from clinic.api.context import request_context
from clinic.api.network import client_ip
from integrations.models import AuditLogEntry


class Clock:
    def __init__(self) -> None:
        self.at, self.perf = timezone.now(), time.perf_counter()

    def ms(self) -> float:
        return round((time.perf_counter() - self.perf) * 1000, 3)


def staff_actor(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"[:200]


def _uuid(value: Any) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def write_admin_audit(
    request: HttpRequest, response: HttpResponseBase, patient_ids: Iterable[Any], clock: Clock
) -> AuditLogEntry | None:
    """One audit row for an admin page, with the fields the API audit middleware fills; none without patients."""
    parsed = (_uuid(pid) for pid in patient_ids)
    ids = list(dict.fromkeys(pid for pid in parsed if pid is not None))  # first-shown order, no repeats
    if not ids:
        return None
    return _audit_row(request, response, clock, ids, request.path)


def _audit_row(
    request: HttpRequest, response: HttpResponseBase, clock: Clock, patient_ids: list[Any], path: str
) -> AuditLogEntry:
    """The row, with the fields the API audit middleware fills."""
    resolver = getattr(request, "resolver_match", None)
    return AuditLogEntry.objects.create(
        created_at=clock.at,
        client=None,
        actor=staff_actor(request),
        token_ref="",
        ip=client_ip(request),
        method=(request.method or "")[:10],
        route=(resolver.route if resolver is not None else "")[:200],
        path=path[:500],
        status=response.status_code,
        duration_ms=clock.ms(),
        request_id=request_context(request).request_id,
        patient_ids=patient_ids,
        user_agent=request.headers.get("User-Agent", "")[:200],
    )


def _context(response: HttpResponseBase) -> dict[str, Any]:
    if isinstance(response, TemplateResponse) and not response.is_rendered:
        return response.context_data or {}
    return {}


if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

    _AdminBase = ModelAdmin[Any]
else:
    _AdminBase = object


class PatientDataAuditMixin(_AdminBase):
    """For a ModelAdmin whose pages show patient data. Put it first among the bases."""

    # False where the list page shows no patient data (only the object's own page does).
    audit_list_page = True

    def patient_ids_of(self, obj: Any) -> Iterable[Any]:
        """The patients whose data showing `obj` reveals. Default: the object's `patient_id`."""
        return [getattr(obj, "patient_id", None)]

    def _patients_of(self, objects: Iterable[Any]) -> list[Any]:
        return [pid for obj in objects for pid in self.patient_ids_of(obj)]

    # --- the views ---------------------------------------------------------------------------------

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        clock = Clock()
        response = super().changeform_view(request, object_id, form_url, extra_context)
        shown = _context(response).get("original")
        objects = [shown] if shown is not None else request_context(request).saved_objects
        write_admin_audit(request, response, self._patients_of(objects), clock)
        return response

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        clock = Clock()
        response = super().history_view(request, object_id, extra_context)
        shown = _context(response).get("object")
        write_admin_audit(request, response, self._patients_of([shown] if shown is not None else []), clock)
        return response

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        clock = Clock()
        # After a confirmed delete the object is gone: whose it was is read first.
        before = self.get_object(request, unquote(object_id)) if request.method == "POST" else None
        response = super().delete_view(request, object_id, extra_context)
        shown = _context(response).get("object") or before
        write_admin_audit(request, response, self._patients_of([shown] if shown is not None else []), clock)
        return response

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        clock = Clock()
        acted_on = self._action_objects(request)
        response = super().changelist_view(request, extra_context)
        changelist = _context(response).get("cl")
        if acted_on:
            objects = acted_on
        elif changelist is not None and self.audit_list_page:
            objects = list(changelist.result_list)
        else:
            objects = []
        write_admin_audit(request, response, self._patients_of(objects), clock)
        return response

    def _action_objects(self, request: HttpRequest) -> list[Any]:
        """The rows an action posted from the list page runs on (its confirmation page shows them)."""
        if request.method != "POST" or not request.POST.get("action") or not self.audit_list_page:
            return []
        queryset = self.get_queryset(request)
        if request.POST.get("select_across") != "1":
            selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
            if not selected:
                return []
            queryset = queryset.filter(pk__in=selected)
        else:
            queryset = self.get_changelist_instance(request).get_queryset(request)
        return list(queryset)

    # --- the saved object of a POST that redirects --------------------------------------------------

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: str | None = None) -> HttpResponse:
        request_context(request).saved_objects = [obj]
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        request_context(request).saved_objects = [obj]
        return super().response_change(request, obj)

    def audit_autocomplete(
        self, request: HttpRequest, response: HttpResponseBase, to_field_name: str, values: list[str], clock: Clock
    ) -> None:
        """An autocomplete answer (the patient picker of an invoice form) lists patients too."""
        objects = self.get_queryset(request).filter(**{f"{to_field_name}__in": values}) if values else []
        write_admin_audit(request, response, self._patients_of(objects), clock)


def patient_ids_in_payload(payload: Any) -> list[str]:
    """The patient UUIDs an event payload names (`{"patient": {"id": ...}}` at any depth)."""
    found: list[str] = []
    if isinstance(payload, dict):
        patient = payload.get("patient")
        if isinstance(patient, dict) and patient.get("id"):
            found.append(patient["id"])
        for value in payload.values():
            found += patient_ids_in_payload(value)
    elif isinstance(payload, list):
        for value in payload:
            found += patient_ids_in_payload(value)
    return found


def audit_autocomplete_response(site: Any, request: HttpRequest, response: HttpResponse, clock: Clock) -> None:
    """Called by the admin site's autocomplete view: audits answers from a PatientDataAuditMixin admin."""
    import json

    from django.contrib.admin.views.autocomplete import AutocompleteJsonView
    from django.core.exceptions import PermissionDenied
    from django.http import Http404

    if response.status_code != 200:
        return
    try:
        _term, model_admin, _field, to_field_name = AutocompleteJsonView(admin_site=site).process_request(request)
    except (PermissionDenied, Http404):  # answered 403/404 already: nothing was listed
        return
    if not isinstance(model_admin, PatientDataAuditMixin):
        return
    values = [row["id"] for row in json.loads(response.content).get("results", [])]
    model_admin.audit_autocomplete(request, response, to_field_name, values, clock)


def write_admin_export_audit(request: HttpRequest, response: HttpResponseBase, clock: Clock) -> AuditLogEntry:
    """One audit row for an export of figures that name no patient (the day's collections as CSV): who took
    them, when and from where, with no patient ids, so every download from the admin is on record."""
    return _audit_row(request, response, clock, [], request.get_full_path())
