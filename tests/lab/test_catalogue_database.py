"""The catalogue's invariants in PostgreSQL (lab.models): whatever writes a row, overlapping bands of one
sex, a malformed LOINC code and a test that is neither a lab test with a specimen nor an imaging test with
a modality are refused."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from lab.loinc import check_digit, loinc_problem
from lab.models import Analyte, LabTest, ReferenceRange

pytestmark = pytest.mark.django_db


@pytest.fixture
def hgb():
    test = LabTest.objects.create(code="CBC", name="CBC", loinc_code="58410-2", kind="lab", specimen_type="Whole blood")
    return Analyte.objects.create(test=test, code="HGB", loinc_code="718-7", name="Hemoglobin", unit="g/dL")


def _refused(**fields):
    with pytest.raises(IntegrityError) as raised, transaction.atomic():
        ReferenceRange.objects.create(**fields)
    return raised


def test_overlapping_bands_of_one_sex_are_refused(hgb):
    ReferenceRange.objects.create(analyte=hgb, sex="male", age_min_days=6570, low=Decimal(13), high=Decimal(17))

    raised = _refused(analyte=hgb, sex="male", age_min_days=10000, low=Decimal(12), high=Decimal(16))

    assert "referencerange_no_overlap_per_sex" in str(raised.value)
    # Adjacent bands ([365, 6570) and [6570, ...)) and another sex are fine.
    ReferenceRange.objects.create(
        analyte=hgb, sex="male", age_min_days=365, age_max_days=6570, low=Decimal(11), high=Decimal(15)
    )
    ReferenceRange.objects.create(analyte=hgb, sex="female", age_min_days=6570, low=Decimal(12), high=Decimal(15))
    assert ReferenceRange.objects.count() == 3


def test_an_empty_band_and_low_above_high_are_refused(hgb):
    assert "age_band_not_empty" in str(
        _refused(analyte=hgb, age_min_days=100, age_max_days=100, low=Decimal(1), high=Decimal(2)).value
    )
    assert "low_at_most_high" in str(_refused(analyte=hgb, low=Decimal(3), high=Decimal(2)).value)
    assert "low_at_most_high" in str(_refused(analyte=hgb, low=None, high=None).value)
    assert ReferenceRange.objects.count() == 0


@pytest.mark.parametrize("code", ["718", "718-77", "12345678-9", "A18-7", " 718-7"])
def test_a_malformed_loinc_code_is_refused(code):
    with pytest.raises(IntegrityError, match="labtest_loinc_format"), transaction.atomic():
        LabTest.objects.create(code="X", name="X", loinc_code=code, kind="lab", specimen_type="Serum")


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "lab", "specimen_type": ""},
        {"kind": "lab", "specimen_type": "Serum", "modality": "CT"},
        {"kind": "imaging", "modality": ""},
        {"kind": "imaging", "modality": "CT", "specimen_type": "Serum"},
        {"kind": "imaging", "modality": "ZZ"},
    ],
)
def test_a_test_is_a_lab_test_with_a_specimen_or_an_imaging_test_with_a_modality(fields):
    with pytest.raises(IntegrityError, match="labtest_specimen_or_modality"), transaction.atomic():
        LabTest.objects.create(code="X", name="X", loinc_code="24627-2", **fields)
    assert LabTest.objects.count() == 0


@pytest.mark.parametrize(
    "code", ["58410-2", "718-7", "2093-3", "6690-2", "777-3", "4544-3", "57698-3", "883-9", "36643-5", "24627-2"]
)
def test_real_loinc_codes_have_their_check_digit(code):
    assert loinc_problem(code) is None
    number, digit = code.split("-")
    assert check_digit(number) == int(digit)


@pytest.mark.parametrize(("code", "expected"), [("718-8", "-7"), ("58410-3", "-2"), ("2093-0", "-3")])
def test_a_wrong_check_digit_is_named(code, expected):
    assert f"ends in {expected}" in (loinc_problem(code) or "")
