"""GST arithmetic (docs/api-rules.md §11): a table of worked lines, the .005 boundaries, the odd-paisa split,
and an independent integer-paise implementation checked against clinic.lib.tax over random lines."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from clinic.lib import tax
from clinic.lib.tax import (
    DiscountTooLarge,
    LineTax,
    inclusive_price_line,
    invoice_totals,
    is_interstate,
    line_tax,
    round_money,
)

D = Decimal

# quantity, rate, discount, tax rate, inter-state -> taxable, cgst, sgst, igst, amount
TABLE = [
    ("1", "1000.00", "0", "18", False, "1000.00", "90.00", "90.00", "0.00", "1180.00"),
    ("1", "1000.00", "0", "18", True, "1000.00", "0.00", "0.00", "180.00", "1180.00"),
    ("1", "500.00", "0", "0", False, "500.00", "0.00", "0.00", "0.00", "500.00"),
    ("1", "500.00", "0", "0", True, "500.00", "0.00", "0.00", "0.00", "500.00"),
    ("2", "325.50", "51.00", "5", False, "600.00", "15.00", "15.00", "0.00", "630.00"),
    ("2", "325.50", "51.00", "5", True, "600.00", "0.00", "0.00", "30.00", "630.00"),
    # 0.5 x 333.33 = 166.665 -> 166.67; 12 % of it is 20.0004 -> 20.00
    ("0.5", "333.33", "0", "12", False, "166.67", "10.00", "10.00", "0.00", "186.67"),
    ("0.5", "333.33", "0", "12", True, "166.67", "0.00", "0.00", "20.00", "186.67"),
    # 2.75 x 120 = 330.00, less 30 discount; 18 % of 300
    ("2.75", "120.00", "30.00", "18", False, "300.00", "27.00", "27.00", "0.00", "354.00"),
    # odd paisa: 12 % of 0.42 = 0.0504 -> 0.05 -> CGST 0.03 + SGST 0.02
    ("1", "0.42", "0", "12", False, "0.42", "0.03", "0.02", "0.00", "0.47"),
    ("1", "0.42", "0", "12", True, "0.42", "0.00", "0.00", "0.05", "0.47"),
    # .005 on the tax: 18 % of 0.25 = 0.045 -> 0.05 (banker's rounding would give 0.04)
    ("1", "0.25", "0", "18", False, "0.25", "0.03", "0.02", "0.00", "0.30"),
    ("1", "0.25", "0", "18", True, "0.25", "0.00", "0.00", "0.05", "0.30"),
    # .005 on the tax: 5 % of 10.10 = 0.505 -> 0.51 (banker's: 0.50); halves 0.26 + 0.25
    ("1", "10.10", "0", "5", False, "10.10", "0.26", "0.25", "0.00", "10.61"),
    # .005 on quantity x rate: 0.125 x 100.04 = 12.505 -> 12.51 (banker's: 12.50)
    ("0.125", "100.04", "0", "0", False, "12.51", "0.00", "0.00", "0.00", "12.51"),
    ("0.125", "100.04", "0", "5", True, "12.51", "0.00", "0.00", "0.63", "13.14"),
    # 18 % of 100.05 = 18.009 -> 18.01; CGST 9.005 -> 9.01, SGST the rest
    ("1", "100.05", "0", "18", False, "100.05", "9.01", "9.00", "0.00", "118.06"),
    ("1", "100.05", "0", "18", True, "100.05", "0.00", "0.00", "18.01", "118.06"),
    # 28 % of 1234.56 = 345.6768 -> 345.68
    ("1", "1234.56", "0", "28", False, "1234.56", "172.84", "172.84", "0.00", "1580.24"),
    # the discount may take the whole line
    ("2", "150.00", "300.00", "18", False, "0.00", "0.00", "0.00", "0.00", "0.00"),
    ("3", "0.00", "0", "18", False, "0.00", "0.00", "0.00", "0.00", "0.00"),
]


@pytest.mark.parametrize(
    ("quantity", "rate", "discount", "tax_rate", "interstate", "taxable", "cgst", "sgst", "igst", "amount"),
    TABLE,
)
def test_line_tax_table(quantity, rate, discount, tax_rate, interstate, taxable, cgst, sgst, igst, amount):
    result = line_tax(
        quantity=D(quantity), rate=D(rate), discount=D(discount), tax_rate=D(tax_rate), interstate=interstate
    )

    assert (result.taxable, result.cgst, result.sgst, result.igst, result.amount) == (
        D(taxable),
        D(cgst),
        D(sgst),
        D(igst),
        D(amount),
    )
    assert all(value.as_tuple().exponent == -2 for value in (result.taxable, result.cgst, result.sgst, result.igst))
    assert result.amount == result.taxable + result.tax


def test_a_discount_above_quantity_times_rate_is_refused():
    with pytest.raises(DiscountTooLarge, match=r"300.01 exceeds quantity x rate \(300.00\)"):
        line_tax(quantity=D(2), rate=D("150.00"), discount=D("300.01"), tax_rate=D(18), interstate=False)


def test_the_discount_is_compared_with_the_rounded_gross():
    # 0.5 x 0.01 = 0.005 -> 0.01, so a discount of 0.01 is allowed.
    result = line_tax(quantity=D("0.5"), rate=D("0.01"), discount=D("0.01"), tax_rate=D(5), interstate=False)

    assert (result.gross, result.taxable, result.amount) == (D("0.01"), D("0.00"), D("0.00"))


def _paise_reference(quantity_milli: int, rate_paise: int, discount_paise: int, rate_bp: int, interstate: bool):
    """The same rules in integer paise, written independently: half-up is (x + half) // unit for x >= 0."""
    gross = (quantity_milli * rate_paise + 500) // 1000
    taxable = gross - discount_paise
    tax = (taxable * rate_bp + 5000) // 10000
    if interstate:
        return taxable, 0, 0, tax
    cgst = (tax + 1) // 2
    return taxable, cgst, tax - cgst, 0


def test_random_lines_match_an_integer_paise_implementation():
    rng = random.Random(20261121)
    for _ in range(5000):
        quantity_milli = rng.choice([1000, 2000, 500, 250, 125, 1500, 3333, rng.randint(1, 50_000)])
        rate_paise = rng.choice([rng.randint(0, 200_000), rng.randint(0, 99), 33_333, 1_005])
        rate_bp = rng.choice([0, 500, 1200, 1800, 2800, 25, 300])
        gross = (quantity_milli * rate_paise + 500) // 1000
        discount_paise = rng.choice([0, 0, rng.randint(0, gross)])
        interstate = rng.random() < 0.5

        result = line_tax(
            quantity=D(quantity_milli) / 1000,
            rate=D(rate_paise) / 100,
            discount=D(discount_paise) / 100,
            tax_rate=D(rate_bp) / 100,
            interstate=interstate,
        )

        taxable, cgst, sgst, igst = _paise_reference(quantity_milli, rate_paise, discount_paise, rate_bp, interstate)
        assert (result.taxable, result.cgst, result.sgst, result.igst) == (
            D(taxable) / 100,
            D(cgst) / 100,
            D(sgst) / 100,
            D(igst) / 100,
        ), (quantity_milli, rate_paise, discount_paise, rate_bp, interstate)
        assert D(0) <= result.cgst - result.sgst <= D("0.01")


def test_totals_are_the_exact_sums_of_the_lines():
    rng = random.Random(7)
    lines: list[LineTax] = [
        line_tax(
            quantity=D(rng.randint(1, 4000)) / 1000,
            rate=D(rng.randint(1, 500_000)) / 100,
            discount=D(0),
            tax_rate=D(rng.choice([0, 5, 12, 18])),
            interstate=False,
        )
        for _ in range(200)
    ]

    totals = invoice_totals(lines)

    assert totals.sub_total == sum((x.gross for x in lines), D("0.00"))
    assert totals.taxable == sum((x.taxable for x in lines), D("0.00"))
    assert totals.cgst == sum((x.cgst for x in lines), D("0.00"))
    assert totals.sgst == sum((x.sgst for x in lines), D("0.00"))
    assert totals.tax == totals.cgst + totals.sgst + totals.igst
    assert totals.grand_total == sum((x.amount for x in lines), D("0.00"))
    assert totals.grand_total == totals.sub_total - totals.discount + totals.tax


def test_totals_of_no_lines_are_zero():
    totals = invoice_totals([])

    assert (totals.sub_total, totals.tax, totals.grand_total) == (D("0.00"), D("0.00"), D("0.00"))


@pytest.mark.parametrize(
    ("patient_state", "branch_state", "interstate"),
    [
        ("Karnataka", "Karnataka", False),
        (" karnataka ", "Karnataka", False),
        ("Tamil  Nadu", "Tamil Nadu", False),
        ("", "Karnataka", False),
        ("   ", "Karnataka", False),
        ("Maharashtra", "Karnataka", True),
    ],
)
def test_interstate_compares_states_ignoring_case_and_spaces_and_unknown_is_local(
    patient_state, branch_state, interstate
):
    assert is_interstate(patient_state=patient_state, branch_state=branch_state) is interstate


@pytest.mark.parametrize(
    ("patient_state", "interstate", "place"),
    [
        ("Karnataka", False, "Karnataka"),
        (" karnataka ", False, "Karnataka"),
        ("IN-KA", False, "Karnataka"),
        ("29", False, "Karnataka"),
        ("", False, "Karnataka"),  # unknown: the branch's own state
        ("Karnatka", False, "Karnataka"),  # an unrecognised legacy value counts as unknown, never as another state
        ("Maharashtra", True, "Maharashtra"),
        ("in-mh", True, "Maharashtra"),
        ("Orissa", True, "Odisha"),
    ],
)
def test_the_place_of_supply_follows_the_patients_state_as_the_closed_list_resolves_it(
    patient_state, interstate, place
):
    assert tax.is_interstate(patient_state=patient_state, branch_state="Karnataka") is interstate
    assert tax.place_of_supply(patient_state=patient_state, branch_state="Karnataka") == place


@pytest.mark.parametrize(
    ("category", "rate", "problem"),
    [
        ("exempt", "0", None),
        ("nil_rated", "0", None),
        ("zero_rated", "0", None),
        ("taxable", "18", None),
        ("taxable", "0.25", None),
        ("taxable", "40", None),
        ("exempt", "5", "carries no tax"),
        ("taxable", "0", "needs a GST rate of 0.25, 3, 5, 12, 18, 28, 40"),
        ("taxable", "17", "needs a GST rate of"),
        ("luxury", "18", "Must be one of"),
    ],
)
def test_a_category_takes_only_its_rates(category, rate, problem):
    found = tax.tax_category_problem(category, Decimal(rate))
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


def test_crediting_a_line_in_three_parts_reverses_exactly_its_tax():
    line = tax.line_tax(
        quantity=Decimal(1), rate=Decimal("100.00"), discount=Decimal(0), tax_rate=Decimal(5), interstate=False
    )
    remaining = line
    parts = []
    for taxable in (Decimal("33.33"), Decimal("33.33"), Decimal("33.34")):
        part = tax.credit_line_tax(taxable=taxable, tax_rate=Decimal(5), interstate=False, remaining=remaining)
        parts.append(part)
        remaining = tax.LineTax(
            gross=remaining.taxable - part.taxable,
            discount=Decimal(0),
            taxable=remaining.taxable - part.taxable,
            cgst=remaining.cgst - part.cgst,
            sgst=remaining.sgst - part.sgst,
            igst=remaining.igst - part.igst,
        )
    assert sum(p.tax for p in parts) == line.tax == Decimal("5.00")
    assert remaining.amount == 0


def test_random_credits_in_parts_match_an_integer_paise_implementation_and_reverse_exactly_the_line():
    """Credit notes in 1-4 random parts of random lines: each part's figures as an independent integer-paise
    computation gives them (the last part takes exactly what is left; no kind ever goes below zero), and the
    parts add up to the line, tax by kind included."""
    rng = random.Random(20261124)
    for _ in range(2000):
        rate_bp = rng.choice([0, 25, 300, 500, 1200, 1800, 2800, 4000])
        interstate = rng.random() < 0.5
        taxable_paise = rng.randint(1, 500_000)
        line = line_tax(
            quantity=D(1), rate=D(taxable_paise) / 100, discount=D(0), tax_rate=D(rate_bp) / 100, interstate=interstate
        )
        left = {
            "taxable": taxable_paise,
            "cgst": int(line.cgst * 100),
            "sgst": int(line.sgst * 100),
            "igst": int(line.igst * 100),
        }
        remaining = line
        parts = rng.randint(1, 4)
        for index in range(parts):
            last = index == parts - 1
            part_paise = left["taxable"] if last else rng.randint(0, left["taxable"])
            result = tax.credit_line_tax(
                taxable=D(part_paise) / 100, tax_rate=D(rate_bp) / 100, interstate=interstate, remaining=remaining
            )
            if part_paise == left["taxable"]:
                expected = dict(left)
            else:
                ref_taxable, cgst, sgst, igst = _paise_reference(1000, part_paise, 0, rate_bp, interstate)
                expected = {
                    "taxable": ref_taxable,
                    "cgst": min(cgst, left["cgst"]),
                    "sgst": min(sgst, left["sgst"]),
                    "igst": min(igst, left["igst"]),
                }
            assert (result.taxable, result.cgst, result.sgst, result.igst) == tuple(
                D(expected[k]) / 100 for k in ("taxable", "cgst", "sgst", "igst")
            ), (rate_bp, interstate, taxable_paise, part_paise)
            left = {k: left[k] - expected[k] for k in left}
            assert min(left.values()) >= 0
            remaining = LineTax(
                gross=remaining.taxable - result.taxable,
                discount=D(0),
                taxable=remaining.taxable - result.taxable,
                cgst=remaining.cgst - result.cgst,
                sgst=remaining.sgst - result.sgst,
                igst=remaining.igst - result.igst,
            )
        assert left == {"taxable": 0, "cgst": 0, "sgst": 0, "igst": 0}


@pytest.mark.parametrize(
    ("unit_price", "quantity", "tax_rate", "rate", "discount", "amount"),
    [
        ("8.50", 15, "12", "7.59", "0.01", "127.50"),
        ("2.00", 10, "12", "1.79", "0.04", "20.00"),
        ("118.00", 1, "18", "100.00", "0.00", "118.00"),
        ("45.00", 3, "0", "45.00", "0.00", "135.00"),
        ("0.01", 1, "5", "0.01", "0.00", "0.01"),
        ("9.99", 7, "28", "7.81", "0.04", "69.93"),
    ],
)
def test_an_inclusive_price_line_adds_up_to_the_price(unit_price, quantity, tax_rate, rate, discount, amount):
    line = inclusive_price_line(unit_price=Decimal(unit_price), quantity=Decimal(quantity), tax_rate=Decimal(tax_rate))
    figures = line_tax(
        quantity=Decimal(quantity), rate=line.rate, discount=line.discount, tax_rate=Decimal(tax_rate), interstate=False
    )

    assert (line.rate, line.discount) == (Decimal(rate), Decimal(discount))
    assert figures.taxable + figures.tax == Decimal(amount)


def test_inclusive_price_lines_never_exceed_the_price_and_fall_short_by_at_most_a_paisa():
    rng = random.Random(13)
    for _ in range(20_000):
        price = Decimal(rng.randint(1, 500_000)) / 100
        quantity = Decimal(rng.randint(1, 500))
        tax_rate = Decimal(rng.choice(["0.25", "3", "5", "12", "18", "28", "40"]))
        line = inclusive_price_line(unit_price=price, quantity=quantity, tax_rate=tax_rate)
        figures = line_tax(
            quantity=quantity, rate=line.rate, discount=line.discount, tax_rate=tax_rate, interstate=rng.random() < 0.5
        )
        total = round_money(price * quantity)
        assert total - Decimal("0.01") <= figures.taxable + figures.tax <= total, (price, quantity, tax_rate)
        assert Decimal(0) <= line.discount < quantity * Decimal("0.01") + Decimal("0.01")
