"""clinic.selectors.doctor_get (and branch_visible_get, below) reads a doctor with the branches a client may see in one constant statement; it
must find exactly whom the ORM's rule finds (Doctor.objects.visible_to, active doctors) and load the same
doctor, department and branches, field for field, for every kind of client over every kind of doctor: active
or not, at open or closed branches, at the client's branches or only at others, at none."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from django.db.models import Prefetch
from django.forms.models import model_to_dict

from clinic.errors import NotFound
from clinic.models import Branch, Doctor
from clinic.selectors import branch_visible_get, doctor_get
from tests.factories import ApiClientFactory, BranchFactory, DepartmentFactory, DoctorFactory

pytestmark = pytest.mark.django_db


def fields(instance: Any) -> dict[str, Any]:
    return {**model_to_dict(instance), "pk": instance.pk, "state_db": instance._state.db, "adding": False}


def orm_read(client: Any, doctor_id: Any) -> Doctor | None:
    """The read doctor_get stands for, through the ORM and the models' own rules."""
    branches = Branch.objects.visible_to(client).filter(is_active=True).order_by("code")
    return (
        Doctor.objects.visible_to(client)
        .filter(is_active=True, id=doctor_id)
        .select_related("department")
        .prefetch_related(Prefetch("branches", queryset=branches, to_attr="shown"))
        .first()
    )


def test_the_statement_finds_and_loads_what_the_orm_rule_does():
    blr, mum, del_ = BranchFactory(code="BLR"), BranchFactory(code="MUM"), BranchFactory(code="DEL")
    closed = BranchFactory(code="OLD", is_active=False)
    branch_sets = [[], [blr], [mum], [blr, mum, del_], [closed], [closed, mum]]
    doctors = []
    for number, (active, branches) in enumerate(itertools.product([True, False], branch_sets)):
        doctor = DoctorFactory(
            name=f"Dr. {number}", department=DepartmentFactory(), is_active=active, registration_number=f"KMC{number}"
        )
        doctor.branches.set(branches)
        doctors.append(doctor)
    clients = [ApiClientFactory(branches=chosen) for chosen in ([], [blr], [mum, del_], [closed], [closed, blr])]

    compared = found = 0
    for client, doctor in itertools.product(clients, doctors):
        expected = orm_read(client, doctor.id)
        compared += 1
        if expected is None:
            with pytest.raises(NotFound):
                doctor_get(client=client, doctor_id=str(doctor.id))
            continue
        found += 1
        got = doctor_get(client=client, doctor_id=str(doctor.id))
        assert fields(got) | {"branches": None} == fields(expected) | {"branches": None}
        assert fields(got.department) == fields(expected.department)
        shown = got.__dict__["visible_branches"]
        assert [fields(branch) for branch in shown] == [fields(branch) for branch in expected.shown]
    assert (compared, found) == (60, 11)  # the matrix holds both outcomes, not only one


def test_an_unknown_or_malformed_id_is_not_found():
    client = ApiClientFactory()
    for doctor_id in ("00000000-0000-4000-8000-000000000000", "not-a-uuid", ""):
        with pytest.raises(NotFound):
            doctor_get(client=client, doctor_id=doctor_id)


def test_a_named_branch_is_found_as_the_orm_rule_finds_it():
    """branch_visible_get: any branch the client may see, open or closed (a closed branch's history is still
    named), none of another's, none that does not exist."""
    blr, mum = BranchFactory(code="BLR"), BranchFactory(code="MUM")
    closed = BranchFactory(code="OLD", is_active=False)
    clients = [ApiClientFactory(branches=chosen) for chosen in ([], [blr], [mum, closed])]
    outcomes = []
    for client in clients:
        for branch_id in (blr.id, mum.id, closed.id, uuid.uuid4()):
            expected = Branch.objects.visible_to(client).filter(id=branch_id).first()
            if expected is None:
                with pytest.raises(NotFound):
                    branch_visible_get(client=client, branch_id=branch_id)
                outcomes.append(False)
                continue
            assert fields(branch_visible_get(client=client, branch_id=branch_id)) == fields(expected)
            outcomes.append(True)
    assert outcomes == [True, True, True, False, True, False, False, False, False, True, True, False]
