"""The staff's review of recorded results (docs/staff.md): acknowledging a critical value, and verifying an
order's preliminary results as final (released).

A critical value (LL, HH) is told to the ordering doctor before anything else; acknowledging it records who
did so and when, once. Verification releases the order's preliminary results as final, and is refused while
any current critical value of the order is unacknowledged: a report does not go out with a critical value
nobody has acted on (as laboratories that notify the doctor first work).

Both start with the order's row lock (lab.locks states the lock order), so an acknowledgement and a
verification of one order, or two acknowledgements of one result, run one after the other.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from clinic.errors import InvalidState
from lab import locks
from lab import results as lab_results
from lab.models import CRITICAL_FLAGS, LabOrder, LabResult, ResultStatus
from lab.representations import plain_quantity


def _shown(result: LabResult) -> str:
    name = result.analyte.code if result.analyte is not None else "report"
    value = plain_quantity(result.value_quantity) if result.value_quantity is not None else result.value_text
    return f"{name} {result.comparator}{value} {result.unit} {result.flag}".replace("  ", " ")


@transaction.atomic
def lab_result_acknowledge_critical(*, result: LabResult, actor: str, note: str = "") -> LabResult:
    """Record that `actor` acknowledged this critical result now, with `note` saying who was told and how
    (the read-back a laboratory documents). 409 invalid_state when the result is not critical, has been
    superseded by a newer version, or was acknowledged already (by whom and when is said)."""
    order = locks.lab_order_lock(order_id=LabResult.objects.values_list("item__order_id", flat=True).get(pk=result.pk))
    locked = LabResult.objects.select_for_update(of=("self",)).select_related("analyte").get(pk=result.pk)
    if not locked.current:
        raise InvalidState(
            "This result has been replaced by a newer version; acknowledge the current one.",
            current_status=order.status,
        )
    if locked.flag not in CRITICAL_FLAGS:
        raise InvalidState(
            f"{_shown(locked)} is not a critical value: there is nothing to acknowledge.", current_status=order.status
        )
    if locked.critical_acknowledged_at is not None:
        at = timezone.localtime(locked.critical_acknowledged_at, order.branch.zone)
        raise InvalidState(
            f"{_shown(locked)} was already acknowledged by {locked.critical_acknowledged_by} "
            f"on {at:%d %b %Y at %H:%M}; nothing was changed.",
            current_status=order.status,
        )
    locked.critical_acknowledged_by = actor.strip()[:200]
    locked.critical_acknowledged_at = timezone.now()
    locked.critical_acknowledgement_note = note.strip()[:500]
    locked.save(update_fields=["critical_acknowledged_by", "critical_acknowledged_at", "critical_acknowledgement_note"])
    return locked


@transaction.atomic
def lab_order_verify(*, order: LabOrder, verifier: str) -> LabOrder:
    """Re-post every current preliminary result of the order as final, verified and recorded by `verifier` (a
    new version each; lab.results keeps the preliminary one, moves the item and order statuses and publishes
    the events). 409 invalid_state while a current critical result is unacknowledged, or when nothing is
    preliminary; nothing is written then."""
    locked = locks.lab_order_lock(order_id=order.pk)
    current = list(
        LabResult.objects.filter(item__order=locked, current=True)
        .select_related("item__test", "analyte")
        .order_by("item__position", "analyte__position", "analyte__code")
    )
    unacknowledged = [r for r in current if r.flag in CRITICAL_FLAGS and r.critical_acknowledged_at is None]
    if unacknowledged:
        values = ", ".join(_shown(result) for result in unacknowledged)
        raise InvalidState(
            f"Acknowledge the critical results first (tell the doctor): {values}. Nothing was released.",
            current_status=locked.status,
        )
    preliminary = [result for result in current if result.status == ResultStatus.PRELIMINARY]
    if not preliminary:
        raise InvalidState("There is no preliminary result to verify.", current_status=locked.status)
    return lab_results.lab_results_record(
        order=locked,
        results=[
            lab_results.ResultInput(
                test=result.item.test.code,
                analyte=result.analyte.code if result.analyte is not None else None,
                value=str(plain_quantity(result.value_quantity))
                if result.value_quantity is not None
                else result.value_text,
                unit=None,
                note=result.note,
                comparator=result.comparator,
                value_high=plain_quantity(result.value_quantity_high),
            )
            for result in preliminary
        ],
        performed_at=timezone.now(),
        performer=verifier,
        status=ResultStatus.FINAL,
        recorded_by=verifier,
    )
