"""The organisation resources: GET /api/v1/branches, GET /api/v1/doctors and GET /api/v1/doctors/{id}."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import list_responses, pagination_parameters, path_id
from clinic.api.serializers import STATE_FORMS, IndianStateField
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet
from clinic.models import Branch, Doctor
from clinic.representations import Branch as BranchShape
from clinic.representations import DoctorSchema, branch_data, doctor_data
from clinic.selectors import branch_list, doctor_branches_visible, doctor_get, doctor_list
from integrations.models import ApiClient

BRANCH_EXAMPLE = {
    "id": "0b6f4c1e-3d1a-4a57-9a57-0d0c6f0f8a11",
    "code": "BLR",
    "name": "Bengaluru Central",
    "state": "Karnataka",
    "gstin": "29ABCDE1234F1ZW",
    "time_zone": "Asia/Kolkata",
    "cancellation_window_minutes": 120,
    "city": "Bengaluru",
}
DOCTOR_EXAMPLE = {
    "id": "7599fc20-8d9b-4406-96d0-16a9a77dff32",
    "name": "Dr. Ananya Rao",
    "department": {"id": "bafb2ca0-c5ab-45f9-b605-5149627241db", "name": "General Medicine"},
    "branch_ids": ["58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591", "0bb99a1f-8b2d-4d6e-8afe-2e6907a323dd"],
    "default_slot_minutes": 15,
}


class BranchListParams(serializers.Serializer):
    state = IndianStateField(required=False, help_text=f"Only branches in this state. {STATE_FORMS}")


class DoctorListParams(serializers.Serializer):
    branch_id = serializers.UUIDField(required=False, help_text="Only doctors consulting at this branch.")
    department = serializers.CharField(
        required=False, max_length=100, help_text="Department name (case-insensitive) or id."
    )


class BranchViewSet(ClinicViewSet[Branch]):
    required_scopes = {"list": "appointments:read"}
    query_params = {"list": (PageParams, BranchListParams)}

    @extend_schema(
        operation_id="branches_list",
        summary="List branches",
        parameters=pagination_parameters(),
        responses=list_responses(BranchShape),
        examples=[OpenApiExample("Two branches", response_only=True, value=[BRANCH_EXAMPLE])],
    )
    def list(self, request: Request) -> Response:
        """The branches this client may see, ordered by code. Scope: `appointments:read`."""
        pagination = HeaderPagination(request, BranchListParams(data=request.query_params))
        branches = list(branch_list(client=self.api_client, state=pagination.filters.get("state")))
        return pagination.response([branch_data(branch) for branch in pagination.paginate(branches)])


def _doctor(*, client: ApiClient, ref: str) -> Doctor:
    return doctor_get(client=client, doctor_id=ref)


class DoctorViewSet(ClinicViewSet[Doctor]):
    required_scopes = {"list": "appointments:read", "retrieve": "appointments:read"}
    query_params = {"list": (PageParams, DoctorListParams)}
    selector = staticmethod(_doctor)

    @extend_schema(
        operation_id="doctors_list",
        summary="List doctors",
        parameters=pagination_parameters(),
        responses=list_responses(DoctorSchema),
        examples=[OpenApiExample("Doctors", response_only=True, value=[DOCTOR_EXAMPLE])],
    )
    def list(self, request: Request) -> Response:
        """Active doctors at the branches this client may see, by name. Scope: `appointments:read`."""
        pagination = HeaderPagination(request, DoctorListParams(data=request.query_params))
        page = pagination.paginate(doctor_list(client=self.api_client, **pagination.filters))
        client = self.api_client
        return pagination.response(
            [doctor_data(doctor, doctor_branches_visible(client=client, doctor=doctor)) for doctor in page]
        )

    @extend_schema(
        operation_id="doctors_retrieve",
        summary="Get a doctor",
        parameters=[path_id("Doctor UUID.")],
        responses={200: shape(DoctorSchema)},
        examples=[OpenApiExample("Doctor", response_only=True, value=DOCTOR_EXAMPLE)],
    )
    def retrieve(self, request: Request, id: str) -> Response:
        """Scope: `appointments:read`. 404 for a doctor at no branch visible to this client."""
        doctor = self.get_object()
        return Response(doctor_data(doctor, doctor_branches_visible(client=self.api_client, doctor=doctor)))
