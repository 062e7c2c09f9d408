"""The catalogue in the admin: LOINC check digits, specimen or modality by kind, UCUM units and coded
values, and reference ranges that never overlap (same sex, or `any` against `male`/`female`), each refused
as a form error naming the field or the rows; a refusal by the database itself is a form error too."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from lab.admin import CONSTRAINT_MESSAGES
from lab.models import Analyte, LabTest, ReferenceRange

pytestmark = pytest.mark.django_db

TEST_ADD = "/admin/lab/labtest/add/"


def _test_data(analytes: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    data = {
        "code": "CBC",
        "name": "Complete blood count",
        "loinc_code": "58410-2",
        "kind": "lab",
        "specimen_type": "Whole blood (EDTA)",
        "modality": "",
        "active": "on",
        **fields,
    }
    rows = analytes or []
    data.update(
        {
            "analytes-TOTAL_FORMS": len(rows),
            "analytes-INITIAL_FORMS": 0,
            "analytes-MIN_NUM_FORMS": 0,
            "analytes-MAX_NUM_FORMS": 1000,
        }
    )
    for index, row in enumerate(rows):
        data.update({f"analytes-{index}-{key}": value for key, value in row.items()})
    return data


def _analyte(**fields: Any) -> dict[str, Any]:
    return {
        "position": 0,
        "code": "HGB",
        "loinc_code": "718-7",
        "name": "Hemoglobin",
        "unit": "g/dL",
        "value_type": "quantity",
        "coded_values": "",
        "critical_low": "",
        "critical_high": "",
        **fields,
    }


def _errors(response) -> dict[str, Any]:
    assert response.status_code == 200, "the form is shown again with its errors"
    form = response.context["adminform"].form
    formsets = response.context["inline_admin_formsets"]
    return {
        "form": {name: list(errors) for name, errors in form.errors.items()},
        "rows": [
            {name: list(errors) for name, errors in errors.items()}
            for inline in formsets
            for errors in inline.formset.errors
        ],
        "formset": [str(error) for inline in formsets for error in inline.formset.non_form_errors()],
    }


def test_a_lab_test_with_its_analytes_is_saved(admin_client):
    response = admin_client.post(
        TEST_ADD,
        _test_data(
            [
                _analyte(),
                _analyte(
                    position=1,
                    code="ABO",
                    loinc_code="883-9",
                    name="ABO",
                    unit="",
                    value_type="coded",
                    coded_values="A,B,AB,O",
                ),
            ]
        ),
    )

    assert response.status_code == 302, _errors(response)
    test = LabTest.objects.get(code="CBC")
    assert list(test.analytes.values_list("code", "coded_values")) == [("HGB", []), ("ABO", ["A", "B", "AB", "O"])]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"loinc_code": "58410-3"}, "loinc_code", "Wrong check digit: LOINC 58410 ends in -2 (mod 10)."),
        ({"loinc_code": "58410"}, "loinc_code", "A LOINC code is 1 to 7 digits, a hyphen and a check digit"),
        ({"specimen_type": ""}, "specimen_type", "A lab test needs its specimen type"),
        ({"modality": "CT"}, "modality", "A lab test has no imaging modality."),
        ({"kind": "imaging"}, "modality", "An imaging test needs its modality"),
        ({"kind": "imaging", "modality": "CT"}, "specimen_type", "An imaging test has no specimen type."),
    ],
)
def test_a_bad_test_is_a_form_error_naming_the_field(admin_client, fields, field, message):
    response = admin_client.post(TEST_ADD, _test_data(**fields))

    errors = _errors(response)["form"]
    assert errors[field][0].startswith(message), errors
    assert LabTest.objects.count() == 0


def test_an_imaging_test_has_a_modality_and_no_analytes(admin_client):
    imaging = {"code": "CT-CHEST", "loinc_code": "24627-2", "kind": "imaging", "modality": "CT", "specimen_type": ""}

    refused = admin_client.post(TEST_ADD, _test_data([_analyte()], **imaging))
    saved = admin_client.post(TEST_ADD, _test_data(**imaging))

    assert _errors(refused)["formset"] == ["An imaging test has no analytes: its result is a text report."]
    assert saved.status_code == 302
    assert LabTest.objects.get().modality == "CT"


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"loinc_code": "718-8"}, "loinc_code", "Wrong check digit: LOINC 718 ends in -7 (mod 10)."),
        ({"unit": ""}, "unit", "A quantity needs its UCUM unit, e.g. g/dL."),
        ({"unit": "g / dL"}, "unit", "A UCUM unit is printable ASCII without spaces"),
        ({"unit": "µg/L"}, "unit", "A UCUM unit is printable ASCII without spaces"),
        ({"value_type": "coded", "unit": ""}, "coded_values", "A coded analyte needs its values"),
        ({"coded_values": "A,B"}, "coded_values", "Only a coded analyte has coded values."),
        ({"critical_low": "20", "critical_high": "7"}, "critical_high", "Must be above the critical low."),
        ({"value_type": "text", "critical_low": "1"}, "critical_low", "Only quantities have limits."),
    ],
)
def test_a_bad_analyte_is_a_form_error_of_its_row(admin_client, fields, field, message):
    response = admin_client.post(TEST_ADD, _test_data([_analyte(**fields)]))

    (row,) = _errors(response)["rows"]
    assert row[field][0].startswith(message), row
    assert LabTest.objects.count() == 0
    assert Analyte.objects.count() == 0


# --- reference ranges on the analyte's page


@pytest.fixture
def hgb():
    test = LabTest.objects.create(code="CBC", name="CBC", loinc_code="58410-2", kind="lab", specimen_type="Whole blood")
    return Analyte.objects.create(test=test, code="HGB", loinc_code="718-7", name="Hemoglobin", unit="g/dL")


def _analyte_data(analyte: Analyte, ranges: list[dict[str, Any]], existing: list[ReferenceRange] = ()) -> dict:
    data = {
        "test": analyte.test_id,
        "position": analyte.position,
        "code": analyte.code,
        "loinc_code": analyte.loinc_code,
        "name": analyte.name,
        "unit": analyte.unit,
        "value_type": analyte.value_type,
        "coded_values": "",
        "critical_low": "",
        "critical_high": "",
        "ranges-TOTAL_FORMS": len(existing) + len(ranges),
        "ranges-INITIAL_FORMS": len(existing),
        "ranges-MIN_NUM_FORMS": 0,
        "ranges-MAX_NUM_FORMS": 1000,
    }
    rows = [
        {
            "id": band.pk,
            "analyte": analyte.pk,
            "sex": band.sex,
            "age_min_days": band.age_min_days,
            "age_max_days": band.age_max_days if band.age_max_days is not None else "",
            "low": band.low if band.low is not None else "",
            "high": band.high if band.high is not None else "",
        }
        for band in existing
    ] + [{"analyte": analyte.pk, "age_max_days": "", "low": "", "high": "", **row} for row in ranges]
    for index, row in enumerate(rows):
        data.update({f"ranges-{index}-{key}": value for key, value in row.items()})
    return data


def _change(analyte: Analyte) -> str:
    return f"/admin/lab/analyte/{analyte.pk}/change/"


def _bands(analyte: Analyte) -> list[tuple[Any, ...]]:
    return list(analyte.ranges.order_by("sex", "age_min_days").values_list("sex", "age_min_days", "age_max_days"))


def test_bands_by_sex_and_age_are_saved(admin_client, hgb):
    response = admin_client.post(
        _change(hgb),
        _analyte_data(
            hgb,
            [
                {"sex": "any", "age_min_days": 365, "age_max_days": 6570, "low": "11.5", "high": "15.5"},
                {"sex": "male", "age_min_days": 6570, "low": "13.5", "high": "17.5"},
                {"sex": "female", "age_min_days": 6570, "low": "12"},
            ],
        ),
    )

    assert response.status_code == 302, _errors(response)
    assert _bands(hgb) == [("any", 365, 6570), ("female", 6570, None), ("male", 6570, None)]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [
                {"sex": "any", "age_min_days": 365, "age_max_days": 7000, "low": "11", "high": "15"},
                {"sex": "male", "age_min_days": 6570, "low": "13", "high": "17"},
            ],
            "Rows 1 and 2 overlap: any 365-7000 days and male 6570- days",
        ),
        (
            [
                {"sex": "female", "age_min_days": 6570, "low": "12", "high": "15"},
                {"sex": "male", "age_min_days": 6570, "low": "13", "high": "17"},
                {"sex": "female", "age_min_days": 0, "age_max_days": 6571, "low": "11", "high": "15"},
            ],
            "Rows 1 and 3 overlap: female 6570- days and female 0-6571 days",
        ),
    ],
)
def test_overlapping_bands_are_a_formset_error_naming_the_rows(admin_client, hgb, rows, message):
    response = admin_client.post(_change(hgb), _analyte_data(hgb, rows))

    (error,) = _errors(response)["formset"]
    assert error.startswith(message), error
    assert _bands(hgb) == []


def test_a_new_any_band_overlapping_a_saved_male_band_is_refused(admin_client, hgb):
    male = ReferenceRange.objects.create(analyte=hgb, sex="male", age_min_days=6570, low=Decimal(13), high=Decimal(17))

    response = admin_client.post(
        _change(hgb), _analyte_data(hgb, [{"sex": "any", "age_min_days": 0, "low": "11", "high": "15"}], [male])
    )

    (error,) = _errors(response)["formset"]
    assert error.startswith("Rows 1 and 2 overlap: male 6570- days and any 0- days")
    assert _bands(hgb) == [("male", 6570, None)]


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"low": "15", "high": "11"}, "high", "Must be at least the low limit."),
        ({"age_min_days": 365, "low": "", "high": ""}, "high", "Give a low limit, a high limit or both."),
        ({"age_min_days": 100, "age_max_days": 100}, "age_max_days", "The age band is empty"),
    ],
)
def test_a_bad_band_is_an_error_of_its_row(admin_client, hgb, row, field, message):
    response = admin_client.post(
        _change(hgb), _analyte_data(hgb, [{"sex": "any", "age_min_days": 0, "low": "11", "high": "15", **row}])
    )

    (errors,) = _errors(response)["rows"]
    assert errors[field][0].startswith(message), errors
    assert _bands(hgb) == []


def test_moving_two_bands_at_once_is_saved(admin_client, hgb):
    child = ReferenceRange.objects.create(
        analyte=hgb, sex="any", age_min_days=365, age_max_days=6570, low=Decimal(11), high=Decimal(15)
    )
    adult = ReferenceRange.objects.create(analyte=hgb, sex="any", age_min_days=6570, low=Decimal(12), high=Decimal(17))
    data = _analyte_data(hgb, [], [child, adult])
    data.update({"ranges-0-age_max_days": 5840, "ranges-1-age_min_days": 5840})

    response = admin_client.post(_change(hgb), data)

    assert response.status_code == 302, _errors(response)
    assert _bands(hgb) == [("any", 365, 5840), ("any", 5840, None)]


def test_ranges_belong_to_quantity_analytes_only(admin_client, hgb):
    data = _analyte_data(hgb, [{"sex": "any", "age_min_days": 0, "low": "1", "high": "2"}])
    data.update({"value_type": "text", "unit": ""})

    response = admin_client.post(_change(hgb), data)

    assert _errors(response)["formset"] == ["Only a quantity analyte has reference ranges."]
    assert Analyte.objects.get().value_type == "quantity"


def test_a_refusal_by_the_database_is_a_form_error_and_saves_nothing(admin_client, hgb):
    """A stale page: a colleague saved a male band after this page was loaded, so the posted rows do not
    show it and the formset sees no overlap; PostgreSQL's exclusion constraint refuses the save."""
    data = _analyte_data(hgb, [{"sex": "male", "age_min_days": 6570, "low": "13", "high": "17"}])
    ReferenceRange.objects.create(analyte=hgb, sex="male", age_min_days=7000, low=Decimal(1), high=Decimal(2))

    response = admin_client.post(_change(hgb), data)

    errors = _errors(response)["form"]
    assert errors["__all__"][0].startswith(CONSTRAINT_MESSAGES["referencerange_no_overlap_per_sex"]), errors
    assert _bands(hgb) == [("male", 7000, None)]
