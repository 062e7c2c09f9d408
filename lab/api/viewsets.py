"""The lab orders under /api/v1/lab/orders (docs/api-rules.md §13): list, create, detail, and the transitions
collect and cancel.

Handlers parse, call one selector or service and answer with lab.representations; a changed order is re-read
through the client's branch restriction. Each operation's description is its handler's docstring
(drf-spectacular reads it).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import error_example, location_header, pagination_parameters
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet, created
from clinic.selectors import branch_only_default
from lab import results, selectors, services
from lab.api import schema
from lab.api.serializers import (
    EmptyBody,
    LabOrderCancelSerializer,
    LabOrderCreateSerializer,
    LabOrderListParams,
    LabResultsSerializer,
)
from lab.models import LabOrder as LabOrderModel
from lab.representations import LabOrder, lab_order_representation

_ID = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Lab order UUID.")
_NOT_FOUND = OpenApiResponse(description="`not_found`: unknown id, or an order at a branch the client may not see.")
_ORDER = OpenApiResponse(shape(LabOrder), description="The order with its items and their results.")
_INVALID = OpenApiResponse(description="`validation_error` (`errors` names every bad field) or `unknown_parameter`.")


class LabOrderViewSet(ClinicViewSet[LabOrderModel]):
    patient_data = True
    selector = staticmethod(selectors.lab_order_get)
    required_scopes = {
        "list": "lab:read",
        "retrieve": "lab:read",
        "create": "lab:write",
        "collect": "lab:write",
        "cancel": "lab:write",
        "results": "lab:write",
    }
    query_params = {"list": (PageParams, LabOrderListParams)}

    def _shown(self, order: LabOrderModel) -> LabOrder:
        """The order a write returned: as it now stands, with everything the representation shows (what its
        event carries, read once for both)."""
        return lab_order_representation(order)

    @extend_schema(
        operation_id="lab_orders_list",
        summary="List lab orders",
        parameters=pagination_parameters(),
        responses={200: OpenApiResponse(shape(LabOrder, many=True), description="A bare JSON array."), 400: _INVALID},
        examples=[schema.ORDER_LIST_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """Orders at the branches the client may see, newest first (then id), each with its items and results.
        Filters: `patient_id` (UUID or PAT-id), `branch_id`, `status`, `test` (a catalogue code), `priority`,
        and `date_from`/`date_to`, inclusive dates of creation at the order's branch. A `patient_id` or
        `branch_id` naming nothing the client may see (at another branch or nowhere) answers an empty list; an
        empty or malformed one is a 400 naming it. Scope: `lab:read`."""
        params = LabOrderListParams(data=request.query_params, context={"client": self.api_client})
        pagination = HeaderPagination(request, params)
        filters = pagination.filters
        patient = filters.pop("patient_id", None)
        if patient is not None:
            self.audit_patients([patient.id])
        branch = filters.pop("branch_id", None)
        orders = selectors.lab_order_list(client=self.api_client, patient=patient, branch=branch, **filters)
        page = pagination.paginate(orders)
        self.audit_patients(order.patient_id for order in page)
        return pagination.response([lab_order_representation(order) for order in page])

    @extend_schema(
        operation_id="lab_orders_create",
        summary="Order lab tests or imaging",
        request=LabOrderCreateSerializer,
        parameters=[location_header("/api/v1/lab/orders/{id}")],
        responses={201: _ORDER, 400: _INVALID},
        examples=[
            schema.ORDER_CREATE_REQUEST,
            schema.ORDER_CREATED_EXAMPLE,
            error_example("Unknown test", schema.BAD_TEST),
        ],
    )
    def create(self, request: Request) -> Response:
        """Places an order of 1 to 20 catalogue tests (each at most once, all active) for a patient at a branch
        (`branch_id` defaults to the client's only branch), by a doctor who works there, optionally from the
        patient's appointment at that branch. The order takes the branch's next number of the calendar year
        (branch-local date), gap-free: `BLR-LAB-2026-000123`; each test becomes an item with its own accession
        number, gap-free per branch and year: `BLR-26-0000123` (what the specimen label and the DICOM worklist
        show). Lab items start `ordered`, imaging items `scheduled`. With `bill: true` each test's billing
        catalogue item is added to the patient's open draft invoice at the branch (the latest), or to a new
        draft; a test without one is a 400 naming it. Honours `Idempotency-Key`. Scope: `lab:write`."""
        client = self.api_client
        body = LabOrderCreateSerializer(data=request.data, context={"client": client})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        patient = data["patient_id"]
        self.audit_patients([patient.id])
        order = services.lab_order_create(
            branch=data.get("branch_id") or branch_only_default(client=client, action="order"),
            patient=patient,
            doctor=data["doctor_id"],
            tests=data["tests"],
            priority=data["priority"],
            clinical_notes=data["clinical_notes"],
            appointment=data.get("appointment_id"),
            bill=data["bill"],
            ordered_by=f"api:{client.name}",
        )
        return created(self._shown(order), f"/api/v1/lab/orders/{order.id}")

    @extend_schema(
        operation_id="lab_orders_retrieve",
        summary="Get a lab order",
        parameters=[_ID],
        responses={200: _ORDER, 404: _NOT_FOUND},
        examples=[schema.ORDER_EXAMPLE, schema.ORDER_COLLECTED_EXAMPLE],
    )
    def retrieve(self, request: Request, id: str) -> Response:
        """The order with its items, their accession numbers and statuses, and their results: the current
        version of each with its earlier versions. Scope: `lab:read`."""
        return Response(lab_order_representation(self.get_object()))

    @extend_schema(
        operation_id="lab_orders_collect",
        summary="Record specimen collection",
        parameters=[_ID],
        request=None,
        responses={
            200: _ORDER,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                description="`invalid_state` (with `current_status`): not `ordered`, or no lab item to collect."
            ),
        },
        examples=[
            schema.ORDER_COLLECTED_EXAMPLE,
            error_example("Already collected", schema.INVALID_STATE_COLLECT),
        ],
    )
    @action(detail=True, methods=["post"])
    def collect(self, request: Request, id: str) -> Response:
        """`ordered` -> `collected`: every lab item's specimen is collected (its item becomes `collected`);
        imaging items keep their own course. Takes no body. 409 `invalid_state` when the order is not
        `ordered`, or has only imaging items. Honours `Idempotency-Key`. Scope: `lab:write`."""
        order = self.get_object(selectors.lab_order_row_get)
        EmptyBody(data=request.data or {}).is_valid(raise_exception=True)
        return Response(self._shown(services.lab_order_collect(order=order)))

    @extend_schema(
        operation_id="lab_orders_cancel",
        summary="Cancel a lab order",
        parameters=[_ID],
        request=LabOrderCancelSerializer,
        responses={
            200: _ORDER,
            400: _INVALID,
            404: _NOT_FOUND,
            409: OpenApiResponse(description="`invalid_state` (with `current_status`): collected, or later."),
        },
        examples=[
            schema.ORDER_CANCEL_REQUEST,
            schema.ORDER_CANCELLED_EXAMPLE,
            error_example("Already collected", schema.INVALID_STATE_CANCEL),
        ],
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, id: str) -> Response:
        """An `ordered` order with nothing collected becomes `cancelled`, with all its items; `reason` is
        required. 409 `invalid_state` once collected (or already cancelled). A billed order's invoice lines are
        left to billing. Honours `Idempotency-Key`. Scope: `lab:write`."""
        order = self.get_object(selectors.lab_order_row_get)
        body = LabOrderCancelSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(self._shown(services.lab_order_cancel(order=order, reason=body.validated_data["reason"])))

    @extend_schema(
        operation_id="lab_orders_results",
        summary="Record results",
        parameters=[_ID, location_header("/api/v1/lab/orders/{id}")],
        request=LabResultsSerializer,
        responses={
            201: _ORDER,
            400: _INVALID,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                description="`invalid_state` (with `current_status`): a cancelled order, an item whose specimen "
                "is not collected yet (`current_status` the item's), or a preliminary or final result posted over "
                "a final one (amend it instead)."
            ),
        },
        examples=[
            schema.RESULTS_REQUEST,
            schema.AMEND_REQUEST,
            schema.ORDER_RESULTED_EXAMPLE,
            error_example("A unit of another analyte", schema.BAD_UNIT),
            error_example("Final already", schema.INVALID_STATE_RESULT),
        ],
    )
    @action(detail=True, methods=["post"])
    def results(self, request: Request, id: str) -> Response:
        """Records results as new versions: `results` (each a `test` of this order, the `analyte` code for lab
        tests, the `value`, optionally its `unit` and a `note`), `performed_at` (with offset), `performer` and
        `status` (`preliminary`, `final`, or `amended` with a `reason` to correct a final result; a preliminary
        or final result over a final one is 409). Quantities are checked against the analyte (a number, never
        negative, at most 4 decimals; a unit must be the analyte's UCUM unit: a wrong unit is a 400 naming
        `results.<i>.unit`); coded values against the analyte's list; imaging results are a text report.
        Each quantity is flagged `N`, `L`, `H`, `LL` or `HH` from the reference band for the patient's sex
        and age at collection (critical limits decide `LL`/`HH`; no band and not critical: no flag), the band
        stored with it. Lab items need their specimen collected first. The item becomes `final` once every
        analyte has a final result (imaging: `completed` with a final report) and the order `final` once
        every item is, else `resulted`. Earlier versions stay in each result's `history`. A critical value
        publishes `lab_result.critical` at once; the order becoming final `lab_result.finalized`; an
        amendment `lab_result.amended`. Honours `Idempotency-Key`. Scope: `lab:write`."""
        order = self.get_object(selectors.lab_order_row_get)
        body = LabResultsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        recorded = results.lab_results_record(
            order=order,
            results=data["results"],
            performed_at=data["performed_at"],
            performer=data["performer"],
            status=data["status"],
            reason=data["reason"],
            recorded_by=f"api:{self.api_client.name}",
        )
        return created(self._shown(recorded), f"/api/v1/lab/orders/{recorded.pk}")
