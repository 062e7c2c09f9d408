"""GET /api/v1/doctors and GET /api/v1/doctors/{id}."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import pagination_parameters
from clinic.api.views import ClinicAPIView
from clinic.models import Doctor
from clinic.selectors import client_branch_ids, doctor_get, doctor_list
from integrations.models import ApiClient


class DoctorDepartmentSchema(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()


class DoctorSchema(serializers.Serializer):
    """The doctor representation, for the OpenAPI document (doctor_data builds it)."""

    openapi_description = "A doctor, with the branches (visible to this client) where they consult."

    id = serializers.UUIDField()
    name = serializers.CharField()
    department = DoctorDepartmentSchema()
    branch_ids = serializers.ListField(child=serializers.UUIDField(), help_text="Branches visible to this client.")
    default_slot_minutes = serializers.IntegerField()


_EXAMPLE = {
    "id": "7599fc20-8d9b-4406-96d0-16a9a77dff32",
    "name": "Dr. Ananya Rao",
    "department": {"id": "bafb2ca0-c5ab-45f9-b605-5149627241db", "name": "General Medicine"},
    "branch_ids": ["58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591", "0bb99a1f-8b2d-4d6e-8afe-2e6907a323dd"],
    "default_slot_minutes": 15,
}


class DoctorListParams(serializers.Serializer):
    branch_id = serializers.UUIDField(required=False, help_text="Only doctors consulting at this branch.")
    department = serializers.CharField(
        required=False, max_length=100, help_text="Department name (case-insensitive) or id."
    )


def doctor_data(doctor: Doctor, client: ApiClient) -> dict[str, Any]:
    allowed = client_branch_ids(client)
    return {
        "id": str(doctor.id),
        "name": doctor.name,
        "department": {"id": str(doctor.department_id), "name": doctor.department.name},
        "branch_ids": sorted(
            str(b.id) for b in doctor.branches.all() if b.is_active and (allowed is None or b.id in allowed)
        ),
        "default_slot_minutes": doctor.default_slot_minutes,
    }


class DoctorListView(ClinicAPIView):
    required_scopes = {"GET": "appointments:read"}
    query_params = {"GET": (PageParams, DoctorListParams)}

    @extend_schema(
        operation_id="doctors_list",
        summary="List doctors",
        description="Active doctors at the branches this client may see, by name. Scope: `appointments:read`.",
        parameters=pagination_parameters(),
        responses={200: DoctorSchema(many=True)},
        examples=[OpenApiExample("Doctors", response_only=True, value=[_EXAMPLE])],
    )
    def get(self, request: Request) -> Response:
        pagination = HeaderPagination(request, DoctorListParams(data=request.query_params))
        page = pagination.paginate(doctor_list(client=self.api_client, **pagination.filters))
        return pagination.response([doctor_data(doctor, self.api_client) for doctor in page])


class DoctorDetailView(ClinicAPIView):
    required_scopes = {"GET": "appointments:read"}

    @extend_schema(
        operation_id="doctors_retrieve",
        summary="Get a doctor",
        description="Scope: `appointments:read`. 404 for a doctor at no branch visible to this client.",
        parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH, description="Doctor UUID.")],
        responses={200: DoctorSchema},
        examples=[OpenApiExample("Doctor", response_only=True, value=_EXAMPLE)],
    )
    def get(self, request: Request, id: str) -> Response:
        return Response(doctor_data(doctor_get(client=self.api_client, doctor_id=id), self.api_client))
