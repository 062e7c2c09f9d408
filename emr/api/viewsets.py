"""GET /api/v1/patients/{id}/record: the clinical record (docs/api-rules.md §15), scope `emr:read`."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import path_id
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet
from emr import selectors
from emr.api import schema
from emr.api.serializers import RecordParams
from emr.representations import ClinicalRecordBody, clinical_record_data


class ClinicalRecordViewSet(ClinicViewSet[selectors.ClinicalRecord]):
    """Routed by hand in emr.api.urls under the patient's path."""

    required_scopes = {"record": "emr:read"}
    query_params = {"record": (PageParams, RecordParams)}
    patient_data = True

    def patients_of(self, found: selectors.ClinicalRecord) -> list[uuid.UUID]:
        return [found.patient.id]

    @extend_schema(
        operation_id="patients_record",
        summary="Get a patient's clinical record",
        parameters=[path_id("Patient UUID or patient_id (PAT-000123).")],
        responses={
            200: shape(ClinicalRecordBody),
            404: OpenApiResponse(description="`not_found`: unknown patient, or one the client may not see."),
        },
        examples=[schema.RECORD_EXAMPLE, schema.NOT_FOUND_EXAMPLE],
    )
    def record(self, request: Request, id: str) -> Response:
        """Encounters (visits), diagnoses (active and past), allergies, medications, prescriptions with their
        items, dispenses with their lines, and lab and imaging results (current versions) with their
        interpretation flags: entries entered in error left out, those of records merged into this patient
        included. Each section is a page of its own (`page`, `per_page`, its `total` and an absolute `next`
        link); `section` asks for one section only, to page through a long history. A client restricted to
        some branches sees the visits, prescriptions, dispenses and results of those branches only. Scope:
        `emr:read`."""
        # HeaderPagination only validates here (one 400 naming every bad parameter); each section pages itself.
        params = HeaderPagination(request, RecordParams(data=request.query_params))
        page, per_page, section = params.page, params.per_page, params.filters.get("section")
        record = self.get_object(
            lambda *, client, ref: selectors.clinical_record(
                client=client,
                ref=ref,
                sections=[section] if section else selectors.SECTIONS,
                offset=(page - 1) * per_page,
                limit=per_page,
            )
        )
        base = request.build_absolute_uri(request.path)

        def next_url(name: str, number: int) -> str:
            return f"{base}?{urlencode({'section': name, 'page': number, 'per_page': per_page})}"

        return Response(clinical_record_data(record, page=page, per_page=per_page, next_url=next_url))
