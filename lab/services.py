"""Writes on lab orders and results (docs/api-rules.md §13): placing an order (numbered, one item per test
with its accession number, optionally billed on the patient's draft invoice), collecting and cancelling it.
Each publishes its event (lab.events) in its own transaction.

Every change to an existing order locks its row first (lab.locks, which states the lock order), so
concurrent changes of one order are serialised and each sees the state the previous one left.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from appointments.models import Appointment
from billing import services as billing_services
from billing.models import Invoice
from clinic.errors import FieldError, InvalidState
from clinic.models import Branch, Doctor
from lab import events, locks, numbering
from lab.models import ItemStatus, LabOrder, LabOrderItem, LabTest, OrderStatus, Priority, TestKind
from patients.models import Patient

# docs/api-rules.md §13: from which statuses each operation is allowed; anything else is 409 invalid_state.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "collect": (OrderStatus.ORDERED,),
    "cancel": (OrderStatus.ORDERED,),
}
MAX_TESTS = 20


def _lock(order: LabOrder, action: str) -> LabOrder:
    """Re-read the order under a row lock and check that `action` is allowed from its status."""
    locked = locks.lab_order_lock(order_id=order.pk)
    if locked.status not in TRANSITIONS[action]:
        allowed = " or ".join(TRANSITIONS[action])
        raise InvalidState(
            f"Cannot {action} an order that is {locked.status}; it must be {allowed}.",
            current_status=locked.status,
        )
    return locked


def _order_problems(
    *,
    branch: Branch,
    patient: Patient,
    doctor: Doctor,
    tests: Sequence[LabTest],
    priority: str,
    appointment: Appointment | None,
    bill: bool,
) -> dict[str, str]:
    """Every reason the order cannot be placed, by field (tests.<index> for a test)."""
    errors: dict[str, str] = {}
    if not patient.is_active:
        errors["patient_id"] = "This patient record is inactive (merged or erroneous)."
    if not branch.is_active:
        errors["branch_id"] = f"The branch {branch.code} is closed."
    if not doctor.is_active or not doctor.branches.filter(id=branch.id).exists():
        errors["doctor_id"] = f"{doctor.name} does not work at the branch {branch.code}."
    if appointment is not None and (appointment.patient_id != patient.id or appointment.branch_id != branch.id):
        errors["appointment_id"] = "Not an appointment of this patient at this branch."
    if priority not in Priority.values:
        errors["priority"] = f"Must be one of: {', '.join(Priority.values)}."
    if not tests:
        errors["tests"] = "Order at least one test."
    elif len(tests) > MAX_TESTS:
        errors["tests"] = f"At most {MAX_TESTS} tests per order."
    seen: set[object] = set()
    for index, test in enumerate(tests):
        field = f"tests.{index}"
        if test.pk in seen:
            errors[field] = f"The test {test.code} is ordered twice."
        elif not test.active:
            errors[field] = f"The test {test.code} is no longer active."
        elif bill and test.billable_service is None:
            errors[field] = f"The test {test.code} has no billing catalogue item, so it cannot be billed."
        elif bill and test.billable_service is not None and not test.billable_service.active:
            errors[field] = f"The billing catalogue item of the test {test.code} is no longer active."
        seen.add(test.pk)
    return errors


def _line(test: LabTest) -> billing_services.LineInput:
    service = test.billable_service
    assert service is not None  # checked by _order_problems
    return billing_services.LineInput(
        service=service,
        service_name=service.name,
        department=service.department,
        rate=service.rate,
        tax_rate=service.tax_rate,
        tax_category=service.tax_category,
        hsn_sac=service.hsn_sac,
    )


def _bill(*, branch: Branch, patient: Patient, tests: Sequence[LabTest]) -> Invoice:
    """The tests' catalogue items on the patient's open draft at the branch, or on a new draft (billing
    finds the draft, locks it and recomputes its totals)."""
    lines = [_line(test) for test in tests]
    return billing_services.invoice_draft_lines_add(branch=branch, patient=patient, lines=lines)


@transaction.atomic
def lab_order_create(
    *,
    branch: Branch,
    patient: Patient,
    doctor: Doctor,
    tests: Sequence[LabTest],
    priority: str,
    clinical_notes: str = "",
    appointment: Appointment | None = None,
    bill: bool = False,
    ordered_by: str,
) -> LabOrder:
    """Place an order: the branch's next order number of the year (branch-local date), one item per test in the
    order given with the branch's next accession numbers (lab items `ordered`, imaging items `scheduled`), and
    with `bill` the tests' catalogue items on the patient's draft invoice at the branch. 400 (FieldError) naming
    every bad field; nothing is written then."""
    errors = _order_problems(
        branch=branch,
        patient=patient,
        doctor=doctor,
        tests=tests,
        priority=priority,
        appointment=appointment,
        bill=bill,
    )
    if errors:
        raise FieldError(errors)
    year = timezone.localtime(timezone.now(), branch.zone).year
    number = numbering.next_order_number(branch_id=branch.id, year=year)
    order = LabOrder.objects.create(
        branch=branch,
        patient=patient,
        doctor=doctor,
        appointment=appointment,
        order_number=numbering.format_order_number(branch.code, year, number),
        priority=priority,
        clinical_notes=clinical_notes,
        ordered_by=ordered_by,
    )
    items = []
    for position, test in enumerate(tests):
        accession = numbering.next_accession_number(branch_id=branch.id, year=year)
        items.append(
            LabOrderItem(
                order=order,
                position=position,
                test=test,
                accession_number=numbering.format_accession_number(branch.code, year, accession),
                status=ItemStatus.ORDERED if test.kind == TestKind.LAB else ItemStatus.SCHEDULED,
                scheduled_at=order.created_at,
            )
        )
    LabOrderItem.objects.bulk_create(items)
    if bill:
        order.invoice = _bill(branch=branch, patient=patient, tests=tests)
        order.save(update_fields=["invoice", "updated_at"])
    return events.lab_order_publish(events.LAB_ORDER_CREATED, order)


@transaction.atomic
def lab_order_collect(*, order: LabOrder) -> LabOrder:
    """ordered -> collected: every lab item `ordered` becomes `collected` at once. An order of imaging items
    only has nothing to collect (409 invalid_state)."""
    order = _lock(order, "collect")
    lab_items = order.items.filter(test__kind=TestKind.LAB, status=ItemStatus.ORDERED)
    if not lab_items.exists():
        raise InvalidState(
            "This order has no lab item to collect (imaging items are scheduled, not collected).",
            current_status=order.status,
        )
    lab_items.update(status=ItemStatus.COLLECTED)
    order.status = OrderStatus.COLLECTED
    order.collected_at = timezone.now()
    order.save(update_fields=["status", "collected_at", "updated_at"])
    return events.lab_order_publish(events.LAB_ORDER_COLLECTED, order)


@transaction.atomic
def lab_order_cancel(*, order: LabOrder, reason: str) -> LabOrder:
    """ordered (and nothing collected) -> cancelled, with every item; `reason` is required (400)."""
    reason = reason.strip()
    if not reason:
        raise FieldError({"reason": "Say why the order is cancelled."})
    order = _lock(order, "cancel")
    if order.items.exclude(status__in=(ItemStatus.ORDERED, ItemStatus.SCHEDULED)).exists():
        raise InvalidState("Work on this order has started (a specimen collected).", current_status=order.status)
    order.items.update(status=ItemStatus.CANCELLED)
    order.status = OrderStatus.CANCELLED
    order.cancelled_at = timezone.now()
    order.cancellation_reason = reason
    order.save(update_fields=["status", "cancelled_at", "cancellation_reason", "updated_at"])
    return events.lab_order_publish(events.LAB_ORDER_CANCELLED, order)
