"""GET/POST /api/v1/patients and GET/PATCH /api/v1/patients/{id}."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import location_header, pagination_parameters
from clinic.api.views import ClinicAPIView
from clinic.selectors import client_branch_ids
from patients import selectors, services
from patients.api import schema
from patients.api.serializers import PatientListParams, PatientWriteSerializer, patient_profile, patient_summary

_REF = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Patient UUID or patient_id (PAT-000123).")


class PatientListCreateView(ClinicAPIView):
    required_scopes = {"GET": "patients:read", "POST": "patients:write"}
    query_params = {"GET": (PageParams, PatientListParams)}

    @extend_schema(
        operation_id="patients_list",
        summary="List or search patients",
        description=(
            "Most recently registered first; with `search`, best match first. `search` (2+ characters) matches "
            "names fuzzily (misspellings, swapped first/last names, partial names), phone digits with or "
            "without the country prefix or a 4+ digit tail, and `patient_id` or the ABHA number exactly "
            "(case and hyphens ignored). Scope: `patients:read`."
        ),
        parameters=pagination_parameters(),
        responses={200: OpenApiResponse(schema.PatientSummaryListSchema, description="A bare JSON array.")},
        examples=[schema.SUMMARY_EXAMPLE],
    )
    def get(self, request: Request) -> Response:
        pagination = HeaderPagination(request, PatientListParams(data=request.query_params))
        filters = pagination.filters
        search = filters.pop("search", None)
        if search:
            found, total = selectors.patient_search(
                client=self.api_client, search=search, offset=pagination.offset, limit=pagination.per_page, **filters
            )
        else:
            found, total = selectors.patient_list(
                client=self.api_client, offset=pagination.offset, limit=pagination.per_page, **filters
            )
        page = pagination.use_page(found, total)
        self.audit_patients(patient.id for patient in page)
        today = timezone.localdate()
        return pagination.response([patient_summary(patient, today) for patient in page])

    @extend_schema(
        operation_id="patients_create",
        summary="Register a patient",
        description=(
            "Required: first_name, last_name (1-100 characters), date_of_birth (1900-01-01..today), gender "
            "(male, female, other, unknown), phone (with country prefix; stored E.164). `branch_id` defaults to "
            "the client's only branch. `national_health_id`: 14-digit ABHA number (hyphens allowed); "
            "`national_id`: 12-digit Aadhaar number, stored encrypted and only ever returned masked. "
            "409 `duplicate_patient` when an active patient has the same phone and date of birth. "
            "Honours `Idempotency-Key`. Scope: `patients:write`."
        ),
        request=PatientWriteSerializer,
        parameters=[location_header("/api/v1/patients/{id}")],
        responses={
            201: OpenApiResponse(schema.PatientProfileSchema, description="The new patient's profile."),
            409: OpenApiResponse(description="`duplicate_patient`, with existing_patient_id and existing_id."),
        },
        examples=[schema.CREATE_EXAMPLE, schema.PROFILE_EXAMPLE, schema.DUPLICATE_EXAMPLE],
    )
    def post(self, request: Request) -> Response:
        client = self.api_client
        body = PatientWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        branch = selectors.registration_branch_resolve(client=client, branch_id=body.validated_data.get("branch_id"))
        patient = services.patient_create(
            branch=branch, data=body.validated_data, visible_branch_ids=client_branch_ids(client)
        )
        self.audit_patients([patient.id])
        profile = selectors.patient_profile(client=client, ref=str(patient.id))
        return Response(
            patient_profile(profile, timezone.localdate()),
            status=201,
            headers={"Location": f"/api/v1/patients/{patient.id}"},
        )


class PatientDetailView(ClinicAPIView):
    required_scopes = {"GET": "patients:read", "PATCH": "patients:write"}

    @extend_schema(
        operation_id="patients_retrieve",
        summary="Get a patient's profile",
        description="Demographics, identifiers (national ID masked), medical summary and visit history. Scope: `patients:read`.",
        parameters=[_REF],
        responses={200: schema.PatientProfileSchema},
        examples=[schema.PROFILE_EXAMPLE],
    )
    def get(self, request: Request, id: str) -> Response:
        profile = selectors.patient_profile(client=self.api_client, ref=id)
        self.audit_patients([profile.patient.id])
        return Response(patient_profile(profile, timezone.localdate()))

    @extend_schema(
        operation_id="patients_partial_update",
        summary="Update a patient",
        description=(
            "Any subset of the create fields; fields not sent stay unchanged (within `address` too); "
            "`insurance`, when sent, replaces the list. Same validation as create; the duplicate rule applies "
            "when phone or date of birth change. Honours `Idempotency-Key`. Scope: `patients:write`."
        ),
        parameters=[_REF],
        request=PatientWriteSerializer,
        responses={
            200: schema.PatientProfileSchema,
            409: OpenApiResponse(description="`duplicate_patient`."),
        },
        examples=[schema.PROFILE_EXAMPLE],
    )
    def patch(self, request: Request, id: str) -> Response:
        client = self.api_client
        patient = selectors.patient_get(client=client, ref=id)
        self.audit_patients([patient.id])
        body = PatientWriteSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        if "branch_id" in data:
            data["branch"] = selectors.registration_branch_resolve(client=client, branch_id=data.pop("branch_id"))
        services.patient_update(patient=patient, data=data, visible_branch_ids=client_branch_ids(client))
        return Response(
            patient_profile(selectors.patient_profile(client=client, ref=str(patient.id)), timezone.localdate())
        )
