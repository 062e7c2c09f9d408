"""seed_demo's lab part: the catalogue of docs/operations.md §3 (a CBC, a lipid panel, a blood group, a chest
X-ray and a CT), each with its exempt billing item, created once (idempotent)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from billing.models import BillableService
from integrations.webhooks.models import WebhookEvent
from lab.devdata.demo import seed_demo_lab
from lab.loinc import loinc_problem
from lab.models import Analyte, LabOrder, LabResult, LabTest, ReferenceRange

pytestmark = pytest.mark.django_db

CODES = ["BLOOD-GROUP", "CBC", "CT-CHEST", "LIPID", "XR-CHEST"]


def test_the_demo_catalogue_has_lab_and_imaging_tests_with_billing_items():
    first = seed_demo_lab()
    again = seed_demo_lab()

    assert first == again
    assert [entry["code"] for entry in first["lab_tests"]] == CODES
    assert LabTest.objects.count() == 5
    cbc = LabTest.objects.get(code="CBC")
    assert (cbc.loinc_code, cbc.kind, cbc.specimen_type) == ("58410-2", "lab", "Whole blood (EDTA)")
    assert list(cbc.analytes.values_list("code", "loinc_code", "unit")) == [
        ("HGB", "718-7", "g/dL"),
        ("WBC", "6690-2", "10*3/uL"),
        ("PLT", "777-3", "10*3/uL"),
        ("HCT", "4544-3", "%"),
    ]
    hgb = cbc.analytes.get(code="HGB")
    assert (hgb.critical_low, hgb.critical_high) == (7, 20)
    assert set(hgb.ranges.values_list("sex", flat=True)) == {"any", "male", "female"}
    assert list(LabTest.objects.get(code="LIPID").analytes.values_list("code", flat=True)) == [
        "CHOL",
        "TRIG",
        "HDL",
        "LDL",
    ]
    abo = Analyte.objects.get(test__code="BLOOD-GROUP", code="ABO")
    assert (abo.value_type, abo.coded_values) == ("coded", ["A", "B", "AB", "O"])
    assert dict(LabTest.objects.filter(kind="imaging").values_list("code", "modality")) == {
        "XR-CHEST": "XR",
        "CT-CHEST": "CT",
    }
    # Every LOINC code has its right check digit; every test its exempt diagnostic billing item.
    codes = [
        *LabTest.objects.values_list("loinc_code", flat=True),
        *Analyte.objects.values_list("loinc_code", flat=True),
    ]
    assert [code for code in codes if loinc_problem(code)] == []
    for test in LabTest.objects.select_related("billable_service__department"):
        service = test.billable_service
        assert service is not None
        assert (service.tax_category, service.hsn_sac) == ("exempt", "999316")
        assert service.department.name == ("Laboratory" if test.kind == "lab" else "Radiology")
    assert ReferenceRange.objects.count() == 14


def test_seed_demo_lists_the_lab_tests_in_its_manifest():
    out = StringIO()

    call_command("seed_demo", "--json", stdout=out)
    call_command("seed_demo", "--json", stdout=StringIO())

    manifest = json.loads(out.getvalue())
    assert [entry["code"] for entry in manifest["lab_tests"]] == CODES
    assert {entry["kind"] for entry in manifest["lab_tests"]} == {"lab", "imaging"}
    assert LabTest.objects.count() == 5
    assert BillableService.objects.filter(code__startswith="LAB-").count() == 3
    assert BillableService.objects.filter(code__startswith="RAD-").count() == 2


def test_seed_demo_places_lab_orders_in_every_state_at_every_branch_once():
    out = StringIO()

    call_command("seed_demo", "--json", stdout=out)
    call_command("seed_demo", "--json", stdout=StringIO())

    manifest = json.loads(out.getvalue())
    statuses = {entry["status"] for entry in manifest["lab_orders"]}
    assert statuses == {"ordered", "collected", "resulted", "final", "cancelled"}
    assert LabOrder.objects.count() == len(manifest["lab_orders"]) == 10
    for branch in LabOrder.objects.values_list("branch__code", flat=True).distinct():
        numbers = sorted(LabOrder.objects.filter(branch__code=branch).values_list("order_number", flat=True))
        assert [int(n[-6:]) for n in numbers] == [1, 2, 3, 4, 5]
    final = LabOrder.objects.filter(status="final").first()
    hgb = LabResult.objects.filter(item__order=final, analyte__code="HGB").order_by("version")
    assert [(r.version, r.status, r.flag) for r in hgb] == [(1, "final", "LL"), (2, "amended", "LL")]
    kinds = set(WebhookEvent.objects.values_list("type", flat=True))
    assert {"lab_order.created", "lab_result.critical", "lab_result.amended", "lab_order.cancelled"} <= kinds
