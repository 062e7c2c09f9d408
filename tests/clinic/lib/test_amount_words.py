"""Amounts in the Indian numbering system (clinic.lib.amount_words): in words for the tax invoice's total, and
in figures grouped in lakhs and crores."""

from __future__ import annotations

from decimal import Decimal

import pytest

from clinic.lib.amount_words import indian_figures, number_in_words, rupees_in_words


@pytest.mark.parametrize(
    ("amount", "words"),
    [
        ("0", "Rupees Zero Only"),
        ("0.00", "Rupees Zero Only"),
        ("0.01", "One Paisa Only"),
        ("0.50", "Fifty Paise Only"),
        ("1", "Rupees One Only"),
        ("1.01", "Rupees One and One Paisa Only"),
        ("19", "Rupees Nineteen Only"),
        ("20", "Rupees Twenty Only"),
        ("21.09", "Rupees Twenty One and Nine Paise Only"),
        ("100", "Rupees One Hundred Only"),
        ("100.50", "Rupees One Hundred and Fifty Paise Only"),
        ("150", "Rupees One Hundred Fifty Only"),
        ("1000", "Rupees One Thousand Only"),
        ("4343.59", "Rupees Four Thousand Three Hundred Forty Three and Fifty Nine Paise Only"),
        ("99999", "Rupees Ninety Nine Thousand Nine Hundred Ninety Nine Only"),
        ("100000", "Rupees One Lakh Only"),
        ("120500.50", "Rupees One Lakh Twenty Thousand Five Hundred and Fifty Paise Only"),
        ("1000001", "Rupees Ten Lakh One Only"),
        ("10000000", "Rupees One Crore Only"),
        (
            "999999999.99",
            "Rupees Ninety Nine Crore Ninety Nine Lakh Ninety Nine Thousand Nine Hundred Ninety Nine and Ninety "
            "Nine Paise Only",
        ),
        ("1000000000", "Rupees One Hundred Crore Only"),
        ("1000000000000", "Rupees One Lakh Crore Only"),
        (
            "999999999999.99",  # the largest grand total an invoice may have
            "Rupees Ninety Nine Thousand Nine Hundred Ninety Nine Crore Ninety Nine Lakh Ninety Nine Thousand Nine "
            "Hundred Ninety Nine and Ninety Nine Paise Only",
        ),
    ],
)
def test_rupees_and_paise_in_words_in_lakhs_and_crores(amount, words):
    assert rupees_in_words(Decimal(amount)) == words


@pytest.mark.parametrize("amount", ["-1", "0.001", "12.345", "NaN", "Infinity"])
def test_a_negative_amount_or_a_fraction_of_a_paisa_has_no_words(amount):
    with pytest.raises(ValueError):  # noqa: PT011 - the message names the amount
        rupees_in_words(Decimal(amount))


def test_whole_numbers_below_a_hundred_are_spelled_without_hyphens():
    assert [number_in_words(n) for n in (0, 7, 13, 40, 45, 99)] == [
        "Zero",
        "Seven",
        "Thirteen",
        "Forty",
        "Forty Five",
        "Ninety Nine",
    ]
    with pytest.raises(ValueError):  # noqa: PT011
        number_in_words(-5)


@pytest.mark.parametrize(
    ("amount", "figures"),
    [
        ("0", "0.00"),
        ("0.5", "0.50"),
        ("999.99", "999.99"),
        ("1000", "1,000.00"),
        ("99999.99", "99,999.99"),
        ("100000", "1,00,000.00"),
        ("120500.50", "1,20,500.50"),
        ("1234567.5", "12,34,567.50"),
        ("999999999.99", "99,99,99,999.99"),
        ("1000000000", "1,00,00,00,000.00"),
        ("999999999999.99", "9,99,99,99,99,999.99"),
        ("-1500", "-1,500.00"),
        ("2.005", "2.01"),  # half-up, as clinic.lib.tax rounds
    ],
)
def test_figures_are_grouped_in_thousands_then_lakhs_and_crores(amount, figures):
    assert indian_figures(Decimal(amount)) == figures
