"""The printable laboratory report: GET /api/v1/lab/orders/{id}.pdf, in the way of the printed invoices
(billing.api.documents).

The PDF is built whole in memory (lab.report) before the response exists: a report that cannot be rendered
is the API's 500 problem, never a part of a file. Branch restriction, scope and the patient-data audit are
ClinicViewSet's, as for the order detail; Cache-Control: no-store is set on every API answer and here again.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers
from rest_framework.request import Request

from clinic.api.renderers import as_accepted, pdf_responses, printed_document_renderers
from clinic.api.viewsets import ClinicViewSet
from lab import selectors
from lab.models import LabOrder
from lab.report import lab_report_response

_ID = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Lab order UUID.")
_FILENAME = OpenApiParameter(
    "Content-Disposition",
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    response=[200],
    required=True,
    description='`inline; filename="BLR-LAB-2026-000123.pdf"`: the order number.',
)


class LabReportViewSet(ClinicViewSet[LabOrder]):
    """Routed by hand in lab.api.urls: a `.pdf` path is no route a router makes."""

    patient_data = True
    selector = staticmethod(selectors.lab_order_get)
    required_scopes = {"report_pdf": "lab:read"}

    def get_renderers(self) -> list[renderers.BaseRenderer]:
        return printed_document_renderers(self.request)

    @extend_schema(
        operation_id="lab_orders_pdf",
        summary="Print a lab order's report (PDF)",
        parameters=[_ID, _FILENAME],
        responses={
            **pdf_responses("The laboratory report, A4."),
            404: OpenApiResponse(
                description="`not_found`: unknown id, or an order at a branch the client may not see."
            ),
        },
    )
    def report_pdf(self, request: Request, id: str) -> HttpResponse:
        """The laboratory report as a PDF: the branch with its address and phone, the order number, the patient
        (name, patient id, sex, age), the doctor, the collection time and the priority; each item with its
        accession number, specimen or modality and status; the current results with value and unit, flag
        (critical LL/HH marked), reference range and status (an amended one with its reason); imaging reports
        as text. A report with any preliminary result says that preliminary results are subject to change.
        Scope: `lab:read`."""
        return as_accepted(request, lab_report_response(self.get_object()))
