"""The pharmacy under /api/v1/pharmacy (docs/api-rules.md §14): the drug catalogue, stock with its receipts and
adjustments, prescriptions and dispenses with their returns.

Handlers parse, call one selector or service and answer with pharmacy.representations; a changed record is
re-read through the client's branch restriction. Each operation's description is its handler's docstring.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import error_example, list_responses, location_header, pagination_parameters, path_id
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet, created
from clinic.selectors import branch_only_default
from pharmacy import selectors, services
from pharmacy.api import schema
from pharmacy.api.serializers import (
    DispenseCreateSerializer,
    DispenseListParams,
    DispenseReturnSerializer,
    DrugListParams,
    PrescriptionCancelSerializer,
    PrescriptionCreateSerializer,
    PrescriptionListParams,
    StockAdjustmentSerializer,
    StockListParams,
    StockReceiptSerializer,
)
from pharmacy.models import Dispense as DispenseModel
from pharmacy.models import Drug as DrugModel
from pharmacy.models import Prescription as PrescriptionModel
from pharmacy.models import StockMovement as StockMovementModel
from pharmacy.representations import (
    Dispense,
    Drug,
    Prescription,
    StockLevel,
    StockMovement,
    dispense_representation,
    drug_representation,
    prescription_representation,
    stock_level_representation,
    stock_movement_representation,
)

_INVALID = OpenApiResponse(description="`validation_error` (`errors` names every bad field) or `unknown_parameter`.")
_PRESCRIPTION = OpenApiResponse(shape(Prescription), description="The prescription with its items.")
_DISPENSE = OpenApiResponse(shape(Dispense), description="The dispense with its lines and returns.")
_MOVEMENT = OpenApiResponse(shape(StockMovement), description="The ledger movement, with its batch after it.")


class DrugViewSet(ClinicViewSet[DrugModel]):
    required_scopes = {"list": "pharmacy:read"}
    query_params = {"list": (PageParams, DrugListParams)}

    @extend_schema(
        operation_id="pharmacy_drugs_list",
        summary="List the drug catalogue",
        parameters=pagination_parameters(),
        responses=list_responses(Drug),
        examples=[schema.DRUGS_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """The active drugs of the catalogue, by code: names, form, strength, HSN code, GST rate, schedule
        (`OTC`, `H`, `H1`, `X`), dispensing unit and default MRP. Filters: `schedule`, `form`, `search` (part
        of the code, generic or brand name). The catalogue is the same at every branch. Scope:
        `pharmacy:read`."""
        pagination = HeaderPagination(request, DrugListParams(data=request.query_params))
        page = pagination.paginate(selectors.drug_list(**pagination.filters))
        return pagination.response([drug_representation(drug) for drug in page])


class StockViewSet(ClinicViewSet[StockMovementModel]):
    required_scopes = {"list": "pharmacy:read", "receipts": "pharmacy:write", "adjustments": "pharmacy:write"}
    query_params = {"list": (PageParams, StockListParams)}

    def _shown(self, movement: StockMovementModel) -> StockMovement:
        return stock_movement_representation(selectors.stock_movement_load(movement.pk))

    @extend_schema(
        operation_id="pharmacy_stock_list",
        summary="List stock on hand",
        parameters=pagination_parameters(),
        responses={**list_responses(StockLevel), 400: _INVALID},
        examples=[schema.STOCK_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """One entry per drug and branch (the branches the client may see) that has a batch or a reorder
        level, by drug code then branch code: `on_hand` counts the non-expired batches (expired stock is
        `expired_on_hand`, apart), `reorder_level` and `below_reorder`, and the batches holding stock, first
        expiry first, each flagged `expired` (its expiry date is not after today at the branch). Filters:
        `branch_id` (a branch the client cannot see answers an empty list), `drug` (a code), `below_reorder`,
        `expiring_before` (a batch holding stock expires before that date). Scope: `pharmacy:read`."""
        params = StockListParams(data=request.query_params, context={"client": self.api_client})
        pagination = HeaderPagination(request, params)
        entries, total = selectors.stock_level_page(
            client=self.api_client, offset=pagination.offset, limit=pagination.per_page, **pagination.filters
        )
        page = pagination.use_page(entries, total)
        return pagination.response([stock_level_representation(entry) for entry in page])

    @extend_schema(
        operation_id="pharmacy_stock_receipts",
        summary="Receive stock",
        request=StockReceiptSerializer,
        parameters=[location_header("/api/v1/pharmacy/stock?branch_id={branch_id}&drug={drug}")],
        responses={201: _MOVEMENT, 400: _INVALID},
        examples=[schema.RECEIPT_REQUEST, schema.RECEIPT_EXAMPLE, error_example("0.5", schema.BAD_QUANTITY)],
    )
    @action(detail=False, methods=["post"])
    def receipts(self, request: Request) -> Response:
        """Receives `quantity` units (a JSON integer, 1 to 100000) of a batch of a drug at a branch
        (`branch_id` defaults to the client's only branch): the batch (drug, branch, batch number) is created
        when new, with its expiry date (after today at the branch), unit cost and MRP per unit; a known batch
        must keep its expiry date and MRP (400 otherwise). Answers the `receipt` movement of the ledger with
        the batch after it. Honours `Idempotency-Key`. Scope: `pharmacy:write`."""
        client = self.api_client
        body = StockReceiptSerializer(data=request.data, context={"client": client})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        branch = data.get("branch_id") or branch_only_default(client=client, action="act")
        movement = services.stock_receive(
            branch=branch,
            drug=data["drug"],
            batch_number=data["batch_number"],
            expiry_date=data["expiry_date"],
            quantity=data["quantity"],
            unit_cost=data["unit_cost"],
            mrp=data["mrp"],
            actor=f"api:{client.name}",
        )
        return created(self._shown(movement), f"/api/v1/pharmacy/stock?branch_id={branch.id}&drug={data['drug'].code}")

    @extend_schema(
        operation_id="pharmacy_stock_adjustments",
        summary="Adjust stock",
        request=StockAdjustmentSerializer,
        parameters=[location_header("/api/v1/pharmacy/stock?branch_id={branch_id}&drug={drug}")],
        responses={
            201: _MOVEMENT,
            400: _INVALID,
            409: OpenApiResponse(description="`insufficient_stock` (with `available`): more out than the batch holds."),
        },
        examples=[
            schema.ADJUSTMENT_REQUEST,
            schema.ADJUSTMENT_EXAMPLE,
            error_example("More than on hand", schema.INSUFFICIENT_STOCK),
        ],
    )
    @action(detail=False, methods=["post"])
    def adjustments(self, request: Request) -> Response:
        """Corrects a batch's on-hand (`drug` and `batch_number` at the branch) by a signed, non-zero whole
        `quantity` with a `reason` (required): an `adjustment` movement of the ledger. Taking out more than the
        batch holds is 409 `insufficient_stock` with `available`. Taking the drug's non-expired stock below its
        reorder level publishes `stock.below_reorder`. Honours `Idempotency-Key`. Scope: `pharmacy:write`."""
        client = self.api_client
        body = StockAdjustmentSerializer(data=request.data, context={"client": client})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        branch = data.get("branch_id") or branch_only_default(client=client, action="act")
        movement = services.stock_adjust(
            branch=branch,
            drug=data["drug"],
            batch_number=data["batch_number"],
            quantity=data["quantity"],
            reason=data["reason"],
            actor=f"api:{client.name}",
        )
        return created(self._shown(movement), f"/api/v1/pharmacy/stock?branch_id={branch.id}&drug={data['drug'].code}")


class PrescriptionViewSet(ClinicViewSet[PrescriptionModel]):
    patient_data = True
    selector = staticmethod(selectors.prescription_get)
    required_scopes = {
        "list": "pharmacy:read",
        "retrieve": "pharmacy:read",
        "create": "pharmacy:write",
        "cancel": "pharmacy:write",
    }
    query_params = {"list": (PageParams, PrescriptionListParams)}

    def _shown(self, prescription: PrescriptionModel) -> Prescription:
        return prescription_representation(selectors.prescription_get(client=self.api_client, ref=str(prescription.pk)))

    @extend_schema(
        operation_id="pharmacy_prescriptions_list",
        summary="List prescriptions",
        parameters=pagination_parameters(),
        responses={**list_responses(Prescription), 400: _INVALID},
        examples=[schema.PRESCRIPTIONS_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """Prescriptions at the branches the client may see, newest first (then id), with their items.
        Filters: `patient_id` (UUID or PAT-id), `branch_id`, `status`, and `date_from`/`date_to`, inclusive
        dates of creation at the branch. A `patient_id` or `branch_id` naming nothing the client may see answers
        an empty list. Scope: `pharmacy:read`."""
        params = PrescriptionListParams(data=request.query_params, context={"client": self.api_client})
        pagination = HeaderPagination(request, params)
        filters = pagination.filters
        patient = filters.pop("patient_id", None)
        if patient is not None:
            self.audit_patients([patient.id])
        page = pagination.paginate(selectors.prescription_list(client=self.api_client, patient=patient, **filters))
        self.audit_patients(prescription.patient_id for prescription in page)
        return pagination.response([prescription_representation(prescription) for prescription in page])

    @extend_schema(
        operation_id="pharmacy_prescriptions_create",
        summary="Write a prescription",
        request=PrescriptionCreateSerializer,
        parameters=[location_header("/api/v1/pharmacy/prescriptions/{id}")],
        responses={201: _PRESCRIPTION, 400: _INVALID},
        examples=[schema.PRESCRIPTION_REQUEST, schema.PRESCRIPTION_CREATED_EXAMPLE],
    )
    def create(self, request: Request) -> Response:
        """Writes a prescription of 1 to 20 drugs (each at most once, all active; `drug` is a catalogue code)
        for a patient at a branch (`branch_id` defaults to the client's only branch) by a doctor who works
        there, optionally from the patient's appointment at that branch. Each item: `dose`, `frequency`,
        `route`, `duration_days` (1 to 365), `quantity` (whole units of the drug's dispensing unit, 1 to
        100000), `instructions`. Numbered per branch and calendar year, gap-free: `BLR-RX-2026-000123`. Each
        drug shows in the patient profile's current medications for the course (from today, `duration_days`
        long) until the prescription is cancelled. Publishes `prescription.created`. Honours
        `Idempotency-Key`. Scope: `pharmacy:write`."""
        client = self.api_client
        body = PrescriptionCreateSerializer(data=request.data, context={"client": client})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        patient = data["patient_id"]
        self.audit_patients([patient.id])
        prescription = services.prescription_create(
            branch=data.get("branch_id") or branch_only_default(client=client, action="act"),
            patient=patient,
            doctor=data["doctor_id"],
            items=data["items"],
            appointment=data.get("appointment_id"),
            created_by=f"api:{client.name}",
        )
        return created(self._shown(prescription), f"/api/v1/pharmacy/prescriptions/{prescription.pk}")

    @extend_schema(
        operation_id="pharmacy_prescriptions_retrieve",
        summary="Get a prescription",
        parameters=[path_id("Prescription UUID.")],
        responses={200: _PRESCRIPTION, 404: OpenApiResponse(description="`not_found`.")},
        examples=[schema.PRESCRIPTION_EXAMPLE],
    )
    def retrieve(self, request: Request, id: str) -> Response:
        """The prescription with its items, each with `dispensed` (dispensed less returned) and `remaining`
        units. Scope: `pharmacy:read`."""
        return Response(prescription_representation(self.get_object()))

    @extend_schema(
        operation_id="pharmacy_prescriptions_cancel",
        summary="Cancel a prescription",
        parameters=[path_id("Prescription UUID.")],
        request=PrescriptionCancelSerializer,
        responses={
            200: _PRESCRIPTION,
            400: _INVALID,
            404: OpenApiResponse(description="`not_found`."),
            409: OpenApiResponse(description="`invalid_state` (with `current_status`): not active."),
        },
        examples=[
            schema.CANCEL_REQUEST,
            schema.PRESCRIPTION_CANCELLED_EXAMPLE,
            error_example("Completed", schema.INVALID_STATE_CANCEL),
        ],
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, id: str) -> Response:
        """An `active` prescription becomes `cancelled` with a `reason` (required); nothing more is dispensed
        against it and its drugs leave the patient's current medications. What was dispensed stays dispensed.
        409 `invalid_state` when completed or cancelled. Honours `Idempotency-Key`. Scope: `pharmacy:write`."""
        prescription = self.get_object()
        body = PrescriptionCancelSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cancelled = services.prescription_cancel(prescription=prescription, reason=body.validated_data["reason"])
        return Response(self._shown(cancelled))


class DispenseViewSet(ClinicViewSet[DispenseModel]):
    patient_data = True
    selector = staticmethod(selectors.dispense_get)
    required_scopes = {
        "list": "pharmacy:read",
        "retrieve": "pharmacy:read",
        "create": "pharmacy:write",
        "returns": "pharmacy:write",
    }
    query_params = {"list": (PageParams, DispenseListParams)}

    def patients_of(self, found: Any) -> Iterable[uuid.UUID]:
        return [found.patient_id] if found.patient_id else []

    def _shown(self, dispense: DispenseModel) -> Dispense:
        return dispense_representation(selectors.dispense_get(client=self.api_client, ref=str(dispense.pk)))

    @extend_schema(
        operation_id="pharmacy_dispenses_list",
        summary="List dispenses",
        parameters=pagination_parameters(),
        responses={**list_responses(Dispense), 400: _INVALID},
        examples=[schema.DISPENSES_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """Dispenses at the branches the client may see, newest first (then id), with their lines and returns.
        Filters: `patient_id`, `branch_id`, `prescription_id`, `date_from`/`date_to` (inclusive, branch-local).
        A reference naming nothing the client may see answers an empty list. Scope: `pharmacy:read`."""
        params = DispenseListParams(data=request.query_params, context={"client": self.api_client})
        pagination = HeaderPagination(request, params)
        filters = pagination.filters
        patient = filters.pop("patient_id", None)
        prescription = filters.pop("prescription_id", None)
        if patient is not None:
            self.audit_patients([patient.id])
        page = pagination.paginate(
            selectors.dispense_list(client=self.api_client, patient=patient, prescription=prescription, **filters)
        )
        self.audit_patients(dispense.patient_id for dispense in page if dispense.patient_id)
        return pagination.response([dispense_representation(dispense) for dispense in page])

    @extend_schema(
        operation_id="pharmacy_dispenses_create",
        summary="Dispense drugs",
        request=DispenseCreateSerializer,
        parameters=[location_header("/api/v1/pharmacy/dispenses/{id}")],
        responses={
            201: _DISPENSE,
            400: _INVALID,
            409: OpenApiResponse(
                description="`prescription_required`, `not_prescribed`, `exceeds_prescription` (with `remaining`), "
                "`batch_expired` (with `batch`), `insufficient_stock` (with `available`), each naming the `drug`; "
                "or `invalid_state` (with `current_status`: the prescription is not active)."
            ),
        },
        examples=[
            schema.DISPENSE_REQUEST,
            schema.OTC_REQUEST,
            schema.DISPENSE_CREATED_EXAMPLE,
            error_example("No prescription", schema.PRESCRIPTION_REQUIRED),
            error_example("Beyond the prescription", schema.EXCEEDS_PRESCRIPTION),
            error_example("Expired batch", schema.BATCH_EXPIRED),
            error_example("Not enough stock", schema.INSUFFICIENT_STOCK),
        ],
    )
    def create(self, request: Request) -> Response:
        """Hands over 1 to 20 drugs (each once; `quantity` whole units) at a branch (`branch_id` defaults to
        the client's only branch). Each item takes from the named `batch`, or from the branch's non-expired
        batches first expiry first out; an expired batch is never used (naming one is 409 `batch_expired`),
        and more than is on hand is 409 `insufficient_stock` with `available`. With `prescription_id` (an
        active prescription of the branch; the patient is its patient) each drug must be on it (409
        `not_prescribed`) and within its remaining quantity (409 `exceeds_prescription` with `remaining`);
        without one, Schedule H, H1 and X drugs are 409 `prescription_required`, and `patient_id` is optional
        (an over-the-counter sale). Schedule H1 and X lines are entered in the controlled drug register.
        With `bill: true` (a patient is then required) one line per drug and price (quantity, rate = the
        batch MRP, HSN code, GST rate, taxable goods) is added to the patient's open draft invoice at the branch
        (the latest) or a new draft. Numbered per branch and year: `BLR-DSP-2026-000456`. Publishes
        `dispense.completed`, and `stock.below_reorder` for a drug whose stock fell below its reorder level.
        Nothing is written on any refusal. Honours `Idempotency-Key`. Scope: `pharmacy:write`."""
        client = self.api_client
        body = DispenseCreateSerializer(data=request.data, context={"client": client})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        prescription, patient = data.get("prescription_id"), data.get("patient_id")
        if prescription is not None:
            self.audit_patients([prescription.patient_id])
        if patient is not None:
            self.audit_patients([patient.id])
        dispense = services.dispense_record(
            branch=data.get("branch_id") or branch_only_default(client=client, action="act"),
            items=data["items"],
            prescription=prescription,
            patient=patient,
            bill=data["bill"],
            dispensed_by=f"api:{client.name}",
        )
        if dispense.patient_id is None:
            self.audit_patients([])
        # Read whole by the service for its event, in this client's branch: shown as it is.
        return created(dispense_representation(dispense), f"/api/v1/pharmacy/dispenses/{dispense.pk}")

    @extend_schema(
        operation_id="pharmacy_dispenses_retrieve",
        summary="Get a dispense",
        parameters=[path_id("Dispense UUID.")],
        responses={200: _DISPENSE, 404: OpenApiResponse(description="`not_found`.")},
        examples=[schema.DISPENSE_EXAMPLE],
    )
    def retrieve(self, request: Request, id: str) -> Response:
        """The dispense with its lines (drug, batch, quantity, returned quantity, MRP, amount) and returns.
        Scope: `pharmacy:read`."""
        return Response(dispense_representation(self.get_object()))

    @extend_schema(
        operation_id="pharmacy_dispenses_returns",
        summary="Return dispensed drugs",
        parameters=[path_id("Dispense UUID."), location_header("/api/v1/pharmacy/dispenses/{id}")],
        request=DispenseReturnSerializer,
        responses={
            201: _DISPENSE,
            400: _INVALID,
            404: OpenApiResponse(description="`not_found`."),
            409: OpenApiResponse(
                description="`exceeds_dispensed` (with `line_id`, `returnable`): more than the line dispensed less "
                "what already came back."
            ),
        },
        examples=[
            schema.RETURN_REQUEST,
            schema.RETURNED_EXAMPLE,
            error_example("More than dispensed", schema.EXCEEDS_DISPENSED),
        ],
    )
    @action(detail=True, methods=["post"])
    def returns(self, request: Request, id: str) -> Response:
        """Takes units back (`lines`: `line_id` of this dispense and whole `quantity`, with a `reason`): each
        into the batch its line came from (a `return` movement), at most what the line dispensed less what
        already came back (409 `exceeds_dispensed`). A prescription's dispensed quantities go down again (a
        completed one becomes active). A billed dispense's invoice is left to billing (a credit note). Answers
        the dispense with its returns. Honours `Idempotency-Key`. Scope: `pharmacy:write`."""
        dispense = self.get_object()
        body = DispenseReturnSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        services.dispense_return(
            dispense=dispense, items=data["lines"], reason=data["reason"], returned_by=f"api:{self.api_client.name}"
        )
        return created(self._shown(dispense), f"/api/v1/pharmacy/dispenses/{dispense.pk}")
