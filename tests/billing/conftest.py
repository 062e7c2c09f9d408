"""Fixtures of the billing tests: two branches in different states, departments, patients at home and
from another state, and tokens for a client limited to the Bengaluru branch."""

from __future__ import annotations

import pytest

from tests.factories import BranchFactory, DepartmentFactory
from tests.patients.factories import PatientFactory


@pytest.fixture
def blr():
    return BranchFactory(
        code="BLR",
        name="Bengaluru Central Clinic",
        state="Karnataka",
        gstin="29AABCC1234D1Z7",
        time_zone="Asia/Kolkata",
    )


@pytest.fixture
def mum():
    return BranchFactory(
        code="MUM",
        name="Mumbai Andheri Hospital",
        state="Maharashtra",
        gstin="27AABCC1234D1ZB",
        time_zone="Asia/Kolkata",
    )


@pytest.fixture
def medicine():
    return DepartmentFactory(name="General Medicine")


@pytest.fixture
def ortho():
    return DepartmentFactory(name="Orthopaedics")


@pytest.fixture
def patient(blr):
    """Lives in Karnataka, registered at BLR: intra-state there."""
    return PatientFactory(
        first_name="Priya",
        last_name="Sharma",
        phone="+919876543210",
        address_state="Karnataka",
        registration_branch=blr,
    )


@pytest.fixture
def visitor(blr):
    """Lives in Maharashtra, registered at BLR: inter-state (IGST) there."""
    return PatientFactory(
        first_name="Rahul",
        last_name="Patil",
        phone="+919820012345",
        address_state="Maharashtra",
        registration_branch=blr,
    )


@pytest.fixture
def writer(blr, token_for):
    return token_for(["billing:write"], branches=[blr])


@pytest.fixture
def reader(blr, token_for):
    return token_for(["billing:read"], branches=[blr])
