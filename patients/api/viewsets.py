"""The patient resource: GET/POST /api/v1/patients and GET/PATCH /api/v1/patients/{id}."""

from __future__ import annotations

import uuid

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import list_responses, location_header, pagination_parameters, path_id
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet, created
from clinic.visibility import client_branch_ids
from patients import selectors, services
from patients.api import schema
from patients.api.serializers import PatientListParams, PatientWriteSerializer
from patients.models import Patient
from patients.representations import PatientProfile, PatientSummary, patient_profile, patient_summary

_REF = path_id("Patient UUID or patient_id (PAT-000123).")


class PatientViewSet(ClinicViewSet[Patient]):
    """Every read goes through the client's branch restriction (patients.selectors); every response names
    the patients it shows in the audit row."""

    required_scopes = {
        "list": "patients:read",
        "create": "patients:write",
        "retrieve": "patients:read",
        "partial_update": "patients:write",
    }
    query_params = {"list": (PageParams, PatientListParams)}
    patient_data = True
    selector = staticmethod(selectors.patient_get)

    def patients_of(self, found: Patient | selectors.PatientProfile) -> list[uuid.UUID]:
        return [found.patient.id if isinstance(found, selectors.PatientProfile) else found.id]

    @extend_schema(
        operation_id="patients_list",
        summary="List or search patients",
        parameters=pagination_parameters(),
        responses=list_responses(PatientSummary),
        examples=[schema.SUMMARY_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """Most recently registered first; with `search`, best match first. `search` (2+ characters) matches
        names fuzzily (misspellings, swapped first/last names, partial names), phone digits with or without
        the country prefix or a 4+ digit tail, and `patient_id` or the ABHA number exactly (case and hyphens
        ignored). Scope: `patients:read`."""
        pagination = HeaderPagination(request, PatientListParams(data=request.query_params))
        filters = pagination.filters
        search = filters.pop("search", None)
        if search:
            found, total = selectors.patient_search(
                client=self.api_client,
                search=search,
                offset=pagination.offset,
                limit=pagination.per_page,
                as_of=pagination.snapshot,
                **filters,
            )
        else:
            found, total = selectors.patient_list(
                client=self.api_client,
                offset=pagination.offset,
                limit=pagination.per_page,
                as_of=pagination.snapshot,
                **filters,
            )
        page = pagination.use_page(found, total, bounded=True)
        self.audit_patients(patient.id for patient in page)
        today = timezone.localdate()
        return pagination.response([patient_summary(patient, today) for patient in page])

    @extend_schema(
        operation_id="patients_create",
        summary="Register a patient",
        request=PatientWriteSerializer,
        parameters=[location_header("/api/v1/patients/{id}")],
        responses={
            201: OpenApiResponse(shape(PatientProfile), description="The new patient's profile."),
            409: OpenApiResponse(description="`duplicate_patient`, with existing_patient_id and existing_id."),
        },
        examples=[schema.CREATE_EXAMPLE, schema.PROFILE_EXAMPLE, schema.DUPLICATE_EXAMPLE],
    )
    def create(self, request: Request) -> Response:
        """Required: first_name, last_name (1-100 characters), date_of_birth (1900-01-01..today), gender (male,
        female, other, unknown), phone (with country prefix; stored E.164). `branch_id` defaults to the
        client's only branch. `national_health_id`: 14-digit ABHA number (hyphens allowed); `national_id`:
        12-digit Aadhaar number, stored encrypted and only ever returned masked. 409 `duplicate_patient` when
        an active patient has the same phone and date of birth. Honours `Idempotency-Key`. Scope:
        `patients:write`."""
        client = self.api_client
        body = PatientWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        branch = selectors.registration_branch_resolve(client=client, branch_id=body.validated_data.get("branch_id"))
        patient = services.patient_create(
            branch=branch, data=body.validated_data, visible_branch_ids=client_branch_ids(client)
        )
        self.audit_patients([patient.id])
        profile = selectors.patient_profile(client=client, ref=str(patient.id))
        return created(patient_profile(profile, timezone.localdate()), f"/api/v1/patients/{patient.id}")

    @extend_schema(
        operation_id="patients_retrieve",
        summary="Get a patient's profile",
        parameters=[_REF],
        responses={200: shape(PatientProfile)},
        examples=[schema.PROFILE_EXAMPLE],
    )
    def retrieve(self, request: Request, id: str) -> Response:
        """Demographics, identifiers (national ID masked), medical summary and visit history. Scope:
        `patients:read`."""
        return Response(patient_profile(self.get_object(selectors.patient_profile), timezone.localdate()))

    @extend_schema(
        operation_id="patients_partial_update",
        summary="Update a patient",
        parameters=[_REF],
        request=PatientWriteSerializer,
        responses={200: shape(PatientProfile), 409: OpenApiResponse(description="`duplicate_patient`.")},
        examples=[schema.PROFILE_EXAMPLE, schema.DUPLICATE_EXAMPLE],
    )
    def partial_update(self, request: Request, id: str) -> Response:
        """Any subset of the create fields; fields not sent stay unchanged (within `address` too);
        `insurance`, when sent, replaces the list. Same validation as create; the duplicate rule applies when
        phone or date of birth change. Honours `Idempotency-Key`. Scope: `patients:write`."""
        client = self.api_client
        patient = self.get_object()
        body = PatientWriteSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        if "branch_id" in data:
            data["branch"] = selectors.registration_branch_resolve(client=client, branch_id=data.pop("branch_id"))
        services.patient_update(patient=patient, data=data, visible_branch_ids=client_branch_ids(client))
        profile = selectors.patient_profile(client=client, ref=str(patient.id))
        return Response(patient_profile(profile, timezone.localdate()))
