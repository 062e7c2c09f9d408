"""seed_demo's lab orders: at each branch one order in every state (ordered, collected, resulted, final with
a critical value and an amendment, cancelled), placed, collected and resulted through the lab services, so
they are numbered and flagged as real ones. Created once: a second run finds them."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from clinic.models import Branch, Doctor
from lab import results, services
from lab.models import LabOrder, LabTest, Priority
from patients.models import Patient


def _result(test: str, value: Any, analyte: str | None = None) -> results.ResultInput:
    return results.ResultInput(test=test, analyte=analyte, value=value)


def _seed_branch(branch: Branch, doctor: Doctor, patients: Sequence[Patient], tests: dict[str, LabTest]) -> None:
    def order(patient: Patient, codes: list[str], priority: str = Priority.ROUTINE) -> LabOrder:
        return services.lab_order_create(
            branch=branch,
            patient=patient,
            doctor=doctor,
            tests=[tests[code] for code in codes],
            priority=priority,
            clinical_notes="Demo order",
            ordered_by="seed_demo",
        )

    def record(target: LabOrder, posted: list[results.ResultInput], status: str = "final", reason: str = "") -> None:
        results.lab_results_record(
            order=target,
            results=posted,
            performed_at=timezone.now(),
            performer="Demo lab",
            status=status,
            reason=reason,
            recorded_by="seed_demo",
        )

    order(patients[0], ["CBC", "LIPID"])  # ordered
    services.lab_order_collect(order=order(patients[1 % len(patients)], ["LIPID"], Priority.URGENT))  # collected
    resulted = order(patients[2 % len(patients)], ["CBC", "XR-CHEST"])
    services.lab_order_collect(order=resulted)
    record(resulted, [_result("CBC", "13.4", "HGB"), _result("CBC", "7.1", "WBC")], status="preliminary")
    final = order(patients[3 % len(patients)], ["CBC", "BLOOD-GROUP"], Priority.STAT)
    services.lab_order_collect(order=final)
    record(
        final,
        [
            _result("CBC", "6.4", "HGB"),  # critical: lab_result.critical
            _result("CBC", "9.8", "WBC"),
            _result("CBC", "210", "PLT"),
            _result("CBC", "21.5", "HCT"),
            _result("BLOOD-GROUP", "B", "ABO"),
            _result("BLOOD-GROUP", "Positive", "RH"),
        ],
    )
    record(final, [_result("CBC", Decimal("6.9"), "HGB")], status="amended", reason="Re-run on a fresh sample")
    cancelled = order(patients[4 % len(patients)], ["CT-CHEST"])
    services.lab_order_cancel(order=cancelled, reason="Ordered twice")


@transaction.atomic
def seed_demo_lab_orders(
    *, branches: Sequence[Branch], doctors: Sequence[Doctor], patients: Sequence[Patient]
) -> dict[str, list[dict[str, Any]]]:
    """Orders in every state at every branch with a doctor, the first time; their manifest entries."""
    tests = {test.code: test for test in LabTest.objects.all()}
    if not LabOrder.objects.filter(patient__in=patients).exists():
        for branch in branches:
            doctor = next((d for d in doctors if d.branches.filter(pk=branch.pk).exists()), None)
            local = [p for p in patients if p.registration_branch_id == branch.id] or list(patients)
            if doctor is not None:
                _seed_branch(branch, doctor, local, tests)
    orders = LabOrder.objects.filter(patient__in=patients).order_by("order_number")
    return {
        "lab_orders": [
            {"id": str(o.id), "name": f"{o.order_number} {o.status} {o.priority}", "status": o.status} for o in orders
        ]
    }
