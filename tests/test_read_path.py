"""One read path (docs/architecture.md §2): every read of branch-owned rows starts from visible_to.

The static half reads the selectors' source: a branch-owned model's manager is only ever followed by
`visible_to(client)` (or `at_branches(ids)`, for the channels bound to branches), except in the app's own
event loaders, which are named `*_load`, and in the few reads listed below with the reason they are safe;
and every public selector that takes a `client` reaches `visible_to`, itself or through another selector.
The behavioural half checks the rule each model declares.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.apps import apps

from clinic.visibility import BranchScopedQuerySet
from tests.factories import ApiClientFactory, BranchFactory, DoctorFactory
from tests.patients.factories import PatientFactory

ROOT = Path(__file__).resolve().parent.parent
SELECTOR_MODULES = sorted(
    path
    for app in ("clinic", "patients", "appointments", "billing", "lab", "pharmacy", "emr")
    for path in (ROOT / app / "selectors.py", ROOT / app / "ports.py")
    if path.exists()
)
ENTRIES = {"visible_to", "at_branches"}

# Reads of branch-owned rows that do not start from the rule, each with why that is safe.
NOT_FROM_THE_RULE = {
    "clinic.selectors.branch_by_ref": "an operator's command names a branch; no client reads through it",
    "patients.selectors._head_office_id": "a candidate branch id, then read through the rule",
    "patients.ports.clinical_alerts": "the alerts of a patient the channel found at its own branches",
    "lab.selectors._with_detail": "the items and results of orders read through the rule",
    "emr.selectors.record_patient_ids": "the records merged into a patient the caller read through the rule",
    "emr.selectors.section_rows": "diagnoses, allergies and medications of patients read through the rule",
    "patients.selectors._last_visit_date": "a subquery correlated to patients read through the rule",
    "lab.selectors.lab_order_items": "the items of an order a service locked after reading it through the rule",
    "lab.selectors.lab_order_list": "an EXISTS over the items of orders read through the rule",
    "lab.selectors.visible_lab_reports": "an EXISTS and the current results of items read through the rule",
    "billing.selectors._detailed": "the lines, payments, credit notes and refunds of an invoice read through it",
    "billing.selectors._credit_notes": "the credit notes of an invoice read through the rule",
    "pharmacy.selectors._prescription_detail": "the items of prescriptions read through the rule",
    "pharmacy.selectors._dispense_detail": "the lines of dispenses read through the rule",
    "lab.selectors._open_critical": "an EXISTS correlated to orders read through the rule",
    "lab.selectors.orders_with_critical_unacknowledged": "an IN over critical results, filtering orders the "
    "caller read through the rule",
    "lab.selectors.work_list": "an EXISTS and a prefetch of the items of orders read through the rule",
    "patients.selectors.patient_possible_duplicates": "whether the person is also registered at a branch the "
    "staff member cannot see: a yes or no naming nothing, as the API's duplicate rule answers",
}

# Constant statements (docs/architecture.md §6) that carry the rule as a parameter, the client's branch ids
# from client_branch_ids, each with the test that holds it to the ORM rule it stands for.
RULE_AS_PARAMETER = {
    "clinic.selectors.doctor_get": "tests/clinic/test_doctor_statement.py",
    "clinic.selectors.branch_visible_get": "tests/clinic/test_doctor_statement.py",
    "patients.selectors._patient_named": "tests/patients/test_patient_statement.py",
    "billing.selectors.invoice_get": "tests/billing/test_invoice_statements.py",
    "lab.selectors.lab_order_get": "tests/lab/test_order_statement.py",
}


def _scoped_models() -> set[str]:
    return {
        model.__name__
        for model in apps.get_models()
        if isinstance(model._default_manager.get_queryset(), BranchScopedQuerySet)
    }


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    tree = ast.parse(path.read_text())
    return {f"{module}.{node.name}": node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _all_functions() -> dict[str, ast.FunctionDef]:
    found: dict[str, ast.FunctionDef] = {}
    for path in SELECTOR_MODULES:
        found.update(_functions(path))
    return found


def _unscoped_reads(function: ast.FunctionDef, models: set[str]) -> list[str]:
    """`Model.objects` of a branch-owned model not followed at once by visible_to or at_branches."""
    parents = {child: node for node in ast.walk(function) for child in ast.iter_child_nodes(node)}
    bad = []
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "objects"
            and isinstance(node.value, ast.Name)
            and node.value.id in models
        ):
            parent = parents.get(node)
            if not (isinstance(parent, ast.Attribute) and parent.attr in ENTRIES):
                bad.append(f"{node.value.id}.objects (line {node.lineno})")
    return bad


def _calls(function: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            target = node.func
            if isinstance(target, ast.Name):
                names.add(target.id)
            elif isinstance(target, ast.Attribute):
                names.add(target.attr)
    return names


def _takes_client(function: ast.FunctionDef) -> bool:
    arguments = function.args
    return any(arg.arg == "client" for arg in [*arguments.args, *arguments.kwonlyargs])


@pytest.mark.django_db
def test_every_read_of_branch_owned_rows_starts_from_the_rule_or_is_a_named_loader():
    models = _scoped_models()
    assert {"Patient", "LabOrder", "Invoice", "Appointment", "Prescription", "Dispense", "Doctor"} <= models
    offenders = {}
    for name, function in _all_functions().items():
        if function.name.endswith("_load") or name in NOT_FROM_THE_RULE or name in RULE_AS_PARAMETER:
            continue
        bad = _unscoped_reads(function, models)
        if bad:
            offenders[name] = bad
    assert offenders == {}, "read through Model.objects.visible_to(client), or name the event loader *_load"


def test_every_selector_that_takes_a_client_reaches_the_rule():
    functions = _all_functions()
    by_short_name: dict[str, list[str]] = {}
    for name in functions:
        by_short_name.setdefault(name.rpartition(".")[2], []).append(name)
    reaching = {name for name, function in functions.items() if "visible_to" in _calls(function)}
    for name, equivalence_test in RULE_AS_PARAMETER.items():
        assert "client_branch_ids" in _calls(functions[name]), name
        assert (ROOT / equivalence_test).exists(), equivalence_test
        reaching.add(name)
    changed = True
    while changed:  # through the selectors each one calls, to a fixed point
        changed = False
        for name, function in functions.items():
            if name not in reaching and any(
                callee in reaching for short in _calls(function) for callee in by_short_name.get(short, [])
            ):
                reaching.add(name)
                changed = True
    missing = sorted(
        name
        for name, function in functions.items()
        if _takes_client(function) and not function.name.startswith("_") and name not in reaching
    )
    assert missing == []


def test_the_exemptions_name_functions_that_exist():
    assert set(NOT_FROM_THE_RULE) <= set(_all_functions())


@pytest.mark.django_db
def test_a_restricted_client_sees_the_rows_of_its_branches_and_an_unrestricted_one_sees_all():
    from patients.models import Patient, Visit
    from tests.factories import DepartmentFactory

    own, other = BranchFactory(code="VTA"), BranchFactory(code="VTB")
    restricted, everyone = ApiClientFactory(branches=[own]), ApiClientFactory()
    mine, theirs = PatientFactory(registration_branch=own), PatientFactory(registration_branch=other)
    assert list(Patient.objects.visible_to(restricted)) == [mine]
    assert set(Patient.objects.visible_to(everyone)) == {mine, theirs}

    # A visit needs both: the patient's branch and the branch where it happened.
    doctor = DoctorFactory(department=DepartmentFactory(), branches=[own, other])
    here = Visit.objects.create(patient=mine, branch=own, doctor=doctor, type="outpatient", start="2026-01-05T09:00Z")
    Visit.objects.create(patient=mine, branch=other, doctor=doctor, type="outpatient", start="2026-01-06T09:00Z")
    Visit.objects.create(patient=theirs, branch=own, doctor=doctor, type="outpatient", start="2026-01-07T09:00Z")
    assert list(Visit.objects.visible_to(restricted)) == [here]
    assert Visit.objects.visible_to(everyone).count() == 3


@pytest.mark.django_db
def test_a_doctor_is_visible_through_an_active_branch_of_the_client():
    from clinic.models import Doctor

    own, closed, other = (
        BranchFactory(code="VDA"),
        BranchFactory(code="VDC", is_active=False),
        BranchFactory(code="VDB"),
    )
    restricted = ApiClientFactory(branches=[own, closed])
    at_own = DoctorFactory(branches=[own, other])
    only_closed = DoctorFactory(branches=[closed])
    elsewhere = DoctorFactory(branches=[other])
    assert list(Doctor.objects.visible_to(restricted)) == [at_own]  # once, though at two branches
    assert set(Doctor.objects.visible_to(ApiClientFactory())) == {at_own, elsewhere}
    assert only_closed not in Doctor.objects.visible_to(ApiClientFactory())
