"""The lab catalogue under /api/v1/lab/tests (docs/api-rules.md §13): the active lab and imaging tests with
their analytes and reference ranges, read-only (the catalogue is edited in the admin)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import list_responses, pagination_parameters
from clinic.api.viewsets import ClinicViewSet
from lab import selectors
from lab.api import schema
from lab.models import LabTest, Modality, TestKind
from lab.representations import LabTest as LabTestShape
from lab.representations import lab_test_data


class LabTestListParams(serializers.Serializer):
    kind = serializers.ChoiceField(choices=TestKind.choices, required=False, help_text="Only lab or imaging tests.")
    modality = serializers.ChoiceField(
        choices=Modality.choices, required=False, help_text="Only imaging tests of this DICOM modality."
    )


class LabTestViewSet(ClinicViewSet[LabTest]):
    required_scopes = {"list": "lab:read"}
    query_params = {"list": (PageParams, LabTestListParams)}

    @extend_schema(
        operation_id="lab_tests_list",
        summary="List the lab and imaging tests",
        parameters=pagination_parameters(),
        responses=list_responses(LabTestShape),
        examples=[schema.LAB_TESTS_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """The active tests of the catalogue, by code: lab tests with their specimen type and analytes (UCUM
        unit, value type, coded values, critical limits, reference ranges by sex and age band in days),
        imaging tests with their modality. `code` is what an order names in `tests`. The catalogue is the
        same at every branch. Scope: `lab:read`."""
        pagination = HeaderPagination(request, LabTestListParams(data=request.query_params))
        page = pagination.paginate(selectors.lab_tests(**pagination.filters))
        return pagination.response([lab_test_data(test) for test in page])
