"""The admin index grouped by work, with plain names (ClinicAdminSite.get_app_list): staff look for "Front
desk" or "Pharmacy", not for the Django app a model lives in. A model no section names (a new app's) stays
under its app's own name after the sections, so nothing registered ever disappears from the index. Each app's
own index page (/admin/<app>/) is Django's, ungrouped."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

# (section, its anchor, the models it holds as "app_label.ModelName" or "app_label.*"), in the working day's order.
SECTIONS: list[tuple[str, str, tuple[str, ...]]] = [
    ("Front desk", "front-desk", ("patients.*", "appointments.Appointment")),
    ("Laboratory", "laboratory", ("lab.*",)),
    ("Pharmacy", "pharmacy", ("pharmacy.*",)),
    ("Accounts", "accounts", ("billing.*",)),
    (
        "Clinic setup",
        "clinic-setup",
        (
            "clinic.Branch",
            "clinic.Department",
            "clinic.Doctor",
            "appointments.WeeklySession",
            "appointments.DoctorLeave",
            "appointments.BranchHoliday",
        ),
    ),
    ("Integrations", "integrations", ("integrations.*",)),
    ("Records and audit", "records-and-audit", ("clinic.RecordChange", "integrations.AuditLogEntry")),
    (
        "Access and security",
        "access-and-security",
        ("auth.*", "clinic.StaffProfile", "oauth2_provider.*", "axes.*", "otp_totp.*"),
    ),
]


def _section_of(app_label: str, object_name: str) -> int | None:
    """The section of a model: its exact name wins over an app's wildcard (the audit log over Integrations)."""
    exact = f"{app_label}.{object_name}"
    for index, (_, _, members) in enumerate(SECTIONS):
        if exact in members:
            return index
    for index, (_, _, members) in enumerate(SECTIONS):
        if f"{app_label}.*" in members:
            return index
    return None


def grouped_app_list(app_list: list[dict[str, Any]], index_url: str | None = None) -> list[dict[str, Any]]:
    """Django's app list (apps with their models, as the user may see them) regrouped into SECTIONS; each
    section in the shape the admin's templates read for an app. Sections the user sees nothing of are left out."""
    index_url = index_url if index_url is not None else reverse("admin:index")
    grouped: list[list[dict[str, Any]]] = [[] for _ in SECTIONS]
    leftovers: list[dict[str, Any]] = []
    for app in app_list:
        unplaced = []
        for model in app["models"]:
            section = _section_of(app["app_label"], model["object_name"])
            if section is None:
                unplaced.append(model)
            else:
                grouped[section].append(model)
        if unplaced:
            leftovers.append({**app, "models": unplaced})
    sections = [
        {
            "name": name,
            "app_label": anchor,
            "app_url": f"{index_url}#{anchor}",
            "has_module_perms": True,
            "models": sorted(models, key=lambda model: str(model["name"])),
        }
        for (name, anchor, _), models in zip(SECTIONS, grouped, strict=True)
        if models
    ]
    return sections + leftovers
