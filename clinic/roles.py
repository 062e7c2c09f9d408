"""The staff roles: one auth Group per journey, with the permissions that journey needs (docs/staff.md).

Groups are created and brought up to date after every `migrate` (`role_groups_sync`, connected to
post_migrate as Django's own permissions are), so every deployment has the same five with exactly these
permissions; an administrator assigns users to them on the user page, beside the user's branches.
"""

from __future__ import annotations

from typing import Any

ADMINISTRATOR = "administrator"
RECEPTIONIST = "receptionist"
LAB_TECHNICIAN = "lab technician"
PHARMACIST = "pharmacist"
ACCOUNTANT = "accountant"

_VIEW = ("view",)
_WORK = ("view", "add", "change")

# role -> {"app.model": actions}; the administrator has every permission (ROLE_EVERYTHING).
ROLE_PERMISSIONS: dict[str, dict[str, tuple[str, ...]]] = {
    RECEPTIONIST: {
        "clinic.branch": _VIEW,
        "clinic.department": _VIEW,
        "clinic.doctor": _VIEW,
        "patients.patient": _WORK,
        "patients.insurance": _WORK,
        "patients.allergy": _VIEW,
        "patients.visit": _VIEW,
        "appointments.appointment": _WORK,
        "appointments.appointmentchange": _VIEW,
        "appointments.weeklysession": _VIEW,
        "appointments.doctorleave": _VIEW,
        "appointments.branchholiday": _VIEW,
        "billing.invoice": _VIEW,
        "billing.payment": ("view", "add"),
    },
    LAB_TECHNICIAN: {
        "clinic.branch": _VIEW,
        "clinic.doctor": _VIEW,
        "patients.patient": _VIEW,
        "lab.labtest": _VIEW,
        "lab.analyte": _VIEW,
        "lab.referencerange": _VIEW,
        "lab.laborder": ("view", "change"),
        "lab.laborderitem": ("view", "change"),
        "lab.labresult": _WORK,
        "lab.imagingstation": _VIEW,
    },
    PHARMACIST: {
        "clinic.branch": _VIEW,
        "clinic.doctor": _VIEW,
        "patients.patient": _VIEW,
        "patients.allergy": _VIEW,
        "pharmacy.drug": _VIEW,
        "pharmacy.reorderlevel": _WORK,
        "pharmacy.batch": _WORK,
        "pharmacy.prescription": _VIEW,
        "pharmacy.prescriptionitem": _VIEW,
        "pharmacy.dispense": _WORK,
        "pharmacy.dispenseline": _VIEW,
        "pharmacy.dispensereturn": ("view", "add"),
        "pharmacy.dispensereturnline": _VIEW,
        "pharmacy.stockmovement": _VIEW,
        "pharmacy.controlleddrugentry": _VIEW,
    },
    ACCOUNTANT: {
        "clinic.branch": _VIEW,
        "clinic.department": _VIEW,
        "patients.patient": _VIEW,
        "billing.billableservice": _VIEW,
        "billing.invoice": _WORK,
        "billing.lineitem": _WORK,
        "billing.payment": ("view", "add"),
        "billing.creditnote": ("view", "add"),
        "billing.creditnoteline": _VIEW,
        "billing.refund": ("view", "add"),
    },
}
ROLES = (ADMINISTRATOR, RECEPTIONIST, LAB_TECHNICIAN, PHARMACIST, ACCOUNTANT)


def role_groups_sync(*, using: str = "default", **_signal: Any) -> None:
    """Create the five groups and set each one's permissions exactly (after every `migrate`).

    post_migrate reaches apps one at a time, so the permissions of every app are created first here."""
    from django.apps import apps
    from django.contrib.auth.management import create_permissions
    from django.contrib.auth.models import Group, Permission

    for app_config in apps.get_app_configs():
        create_permissions(app_config, verbosity=0, using=using)
    administrator, _ = Group.objects.using(using).get_or_create(name=ADMINISTRATOR)
    administrator.permissions.set(Permission.objects.using(using).all())
    for role, grants in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.using(using).get_or_create(name=role)
        wanted = []
        for label, actions in grants.items():
            app_label, model = label.split(".")
            codenames = [f"{action}_{model}" for action in actions]
            wanted += list(
                Permission.objects.using(using).filter(content_type__app_label=app_label, codename__in=codenames)
            )
        group.permissions.set(wanted)
