"""GET /api/v1/branches."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import list_responses, pagination_parameters
from clinic.api.views import ClinicAPIView
from clinic.models import Branch
from clinic.selectors import branch_list


class BranchSerializer(serializers.ModelSerializer):
    class Meta:
        model = Branch
        fields = ["id", "code", "name", "state", "gstin", "time_zone", "cancellation_window_minutes", "city"]


class BranchListParams(serializers.Serializer):
    # Declares the parameter (ClinicAPIView.query_params); the view reads it as sent.
    state = serializers.CharField(required=False, help_text="Only branches in this Indian state (case-insensitive).")


class BranchListView(ClinicAPIView):
    required_scopes = {"GET": "appointments:read"}
    query_params = {"GET": (PageParams, BranchListParams)}

    @extend_schema(
        operation_id="branches_list",
        summary="List branches",
        description="The branches this client may see, ordered by code. Scope: `appointments:read`.",
        parameters=pagination_parameters(),
        responses=list_responses(BranchSerializer),
        examples=[
            OpenApiExample(
                "Two branches",
                response_only=True,
                value=[
                    {
                        "id": "0b6f4c1e-3d1a-4a57-9a57-0d0c6f0f8a11",
                        "code": "BLR",
                        "name": "Bengaluru Central",
                        "state": "Karnataka",
                        "gstin": "29ABCDE1234F1Z5",
                        "time_zone": "Asia/Kolkata",
                        "cancellation_window_minutes": 120,
                        "city": "Bengaluru",
                    }
                ],
            )
        ],
    )
    def get(self, request: Request) -> Response:
        pagination = HeaderPagination(request)
        branches = branch_list(client=self.api_client, state=request.query_params.get("state"))
        return pagination.response(list(BranchSerializer(pagination.paginate(branches), many=True).data))
