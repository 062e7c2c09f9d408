"""Demo staff (make run): one account per role at each demo branch, and a network-wide administrator who is not
a superuser, so each role's home page and journeys can be tried as its staff see them (docs/staff.md)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from clinic.models import Branch, StaffProfile
from clinic.roles import ACCOUNTANT, ADMINISTRATOR, LAB_TECHNICIAN, PHARMACIST, RECEPTIONIST

# (user name prefix, role) at every demo branch: reception.blr, lab.blr, pharmacy.blr, accounts.blr, ...
BRANCH_ROLES = (
    ("reception", RECEPTIONIST),
    ("lab", LAB_TECHNICIAN),
    ("pharmacy", PHARMACIST),
    ("accounts", ACCOUNTANT),
)
DEMO_BRANCHES = ("BLR", "MUM")
MANAGER = "manager"  # the administrator of every branch


@dataclass(frozen=True)
class DemoAccount:
    username: str
    role: str
    where: str  # a branch code, or "every branch"
    password: str | None  # only when created now: it is never stored in clear nor shown again


def demo_staff_ensure() -> list[DemoAccount]:
    """Create the demo accounts that are missing (none before seed_demo made the demo branches)."""
    branches = {branch.code: branch for branch in Branch.objects.filter(code__in=DEMO_BRANCHES)}
    if not branches:
        return []
    wanted: list[tuple[str, str, Branch | None]] = [(MANAGER, ADMINISTRATOR, None)]
    for code in DEMO_BRANCHES:
        if code in branches:
            wanted += [(f"{prefix}.{code.lower()}", role, branches[code]) for prefix, role in BRANCH_ROLES]
    return [_ensure(username, role, branch) for username, role, branch in wanted]


@transaction.atomic
def _ensure(username: str, role: str, branch: Branch | None) -> DemoAccount:
    users = get_user_model().objects
    where = branch.code if branch is not None else "every branch"
    if users.filter(username=username).exists():
        return DemoAccount(username, role, where, None)
    password = secrets.token_urlsafe(12)
    user = users.create_user(username, f"{username}@example.com", password, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    profile = StaffProfile.objects.create(user=user, network_wide=branch is None)
    if branch is not None:
        profile.branches.set([branch])
    return DemoAccount(username, role, where, password)
