"""lab.selectors.lab_order_get reads the order's row (with its branch; for the detail, its patient and doctor
too) with one constant statement; it must find exactly what the ORM read through the rule finds
(LabOrder.objects.visible_to) and load the same rows, field for field, for clients of every kind, with and
without the detail; the items and results come from the event's plans as before (tests of the detail's body:
tests/lab/test_orders_api.py)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.forms.models import model_to_dict

from clinic.errors import NotFound
from lab import services
from lab.models import LabOrder, Priority
from lab.selectors import lab_order_get
from tests.factories import ApiClientFactory, BranchFactory, DepartmentFactory, DoctorFactory
from tests.lab.order_factories import LabTestFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db


def fields(instance: Any) -> dict[str, Any]:
    return {**model_to_dict(instance), "pk": instance.pk, "db": instance._state.db, "adding": instance._state.adding}


def test_the_statement_finds_and_loads_what_the_orm_read_does():
    blr, mum = BranchFactory(code="BLR"), BranchFactory(code="MUM")
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.set([blr, mum])
    cbc = LabTestFactory(code="CBC")
    orders = []
    for branch in (blr, mum):
        patient = PatientFactory(registration_branch=branch, national_id="234567890124")
        orders.append(
            services.lab_order_create(
                branch=branch, patient=patient, doctor=doctor, tests=[cbc], priority=Priority.URGENT, ordered_by="t"
            )
        )
    clients = [ApiClientFactory(branches=chosen) for chosen in ([], [blr], [mum], [blr, mum])]
    refs = [str(order.id) for order in orders] + [str(uuid.uuid4()), "not-an-id"]
    found = 0
    for client, ref, detail in itertools.product(clients, refs, (True, False)):
        try:
            expected = LabOrder.objects.visible_to(client).select_related("branch", "patient", "doctor").get(id=ref)
        except (LabOrder.DoesNotExist, ValidationError):  # unknown, not visible, or not a UUID
            with pytest.raises(NotFound):
                lab_order_get(client=client, ref=ref, detail=detail)
            continue
        got = lab_order_get(client=client, ref=ref, detail=detail)
        assert fields(got) == fields(expected)
        assert fields(got.branch) == fields(expected.branch)
        if detail:
            assert (fields(got.patient), fields(got.doctor)) == (fields(expected.patient), fields(expected.doctor))
            assert [item.pk for item in got.items.all()] == list(
                expected.items.order_by("position", "id").values_list("pk", flat=True)
            )
        found += 1
    assert found == 12  # both orders to the unrestricted and the two-branch client, one each to the others
