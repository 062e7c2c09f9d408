"""The organisation representations: a branch and a doctor, as the API shows them (docs/api-rules.md §4).

Each shape is declared once, as the TypedDict its builder returns; the OpenAPI components of the same
names are derived from these classes (clinic.api.shapes).
"""

from __future__ import annotations

from typing import Annotated, TypedDict

from clinic.lib.shapes import Choices, Doc, Range, UUIDText
from clinic.models import Branch as BranchModel
from clinic.models import Doctor
from clinic.states import IndianState


class Branch(TypedDict):
    id: UUIDText
    code: Annotated[str, Doc("Short code used in invoice numbers, e.g. BLR.")]
    name: str
    state: Annotated[str, Choices(IndianState)]
    gstin: Annotated[str, Doc("15-character GST number.")]
    time_zone: str
    cancellation_window_minutes: Annotated[
        int,
        Range(minimum=0, maximum=7 * 24 * 60),
        Doc("Patients cannot cancel through the API within this many minutes before the slot. 0: any time."),
    ]
    city: str


class DoctorDepartmentSchema(TypedDict):
    id: UUIDText
    name: str


class DoctorSchema(TypedDict):
    """A doctor, with the branches (visible to this client) where they consult."""

    id: UUIDText
    name: str
    department: DoctorDepartmentSchema
    branch_ids: Annotated[list[UUIDText], Doc("Branches visible to this client.")]
    default_slot_minutes: int


def branch_data(branch: BranchModel) -> Branch:
    return {
        "id": str(branch.id),
        "code": branch.code,
        "name": branch.name,
        "state": branch.state,
        "gstin": branch.gstin,
        "time_zone": branch.time_zone,
        "cancellation_window_minutes": branch.cancellation_window_minutes,
        "city": branch.city,
    }


def doctor_data(doctor: Doctor, branches: list[BranchModel]) -> DoctorSchema:
    """The doctor with `branches`: its active branches that the client may see (doctor_branches_visible)."""
    return {
        "id": str(doctor.id),
        "name": doctor.name,
        "department": {"id": str(doctor.department_id), "name": doctor.department.name},
        "branch_ids": sorted(str(b.id) for b in branches),
        "default_slot_minutes": doctor.default_slot_minutes,
    }
