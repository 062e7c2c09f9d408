"""Amounts as a GST tax invoice writes them (docs/api-rules.md §12), in the Indian numbering system: figures
grouped in thousands, lakhs and crores (1,20,500.50), and in words ("Rupees One Lakh Twenty Thousand Five
Hundred and Fifty Paise Only").

Words: no "and" inside a number, so that the one "and" before the paise is never ambiguous ("Rupees One
Hundred Fifty Only" is 150.00; "Rupees One Hundred and Fifty Paise Only" is 100.50). A crore count above
99 is itself written in Indian numbering: 1,00,000 crore is "One Lakh Crore".
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

_ONES = (
    *("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"),
    *("Ten", "Eleven", "Twelve", "Thirteen", "Fourteen", "Fifteen", "Sixteen", "Seventeen", "Eighteen", "Nineteen"),
)
_TENS = ("", "", "Twenty", "Thirty", "Forty", "Fifty", "Sixty", "Seventy", "Eighty", "Ninety")
# The Indian place values below a crore, largest first.
_PLACES = ((100_000, "Lakh"), (1_000, "Thousand"), (100, "Hundred"))
_CRORE = 10_000_000


def _below_hundred(number: int) -> str:
    if number < 20:
        return _ONES[number]
    tens, ones = divmod(number, 10)
    return _TENS[tens] + (f" {_ONES[ones]}" if ones else "")


def number_in_words(number: int) -> str:
    """A whole number >= 0 in words, Indian numbering: 12,34,56,789 -> "Twelve Crore Thirty Four Lakh Fifty
    Six Thousand Seven Hundred Eighty Nine"."""
    if number < 0:
        raise ValueError(f"Not a non-negative whole number: {number}.")
    if number == 0:
        return _ONES[0]
    words: list[str] = []
    crores, number = divmod(number, _CRORE)
    if crores:
        words.append(f"{number_in_words(crores)} Crore")
    for value, name in _PLACES:
        count, number = divmod(number, value)
        if count:
            words.append(f"{_below_hundred(count)} {name}")
    if number:
        words.append(_below_hundred(number))
    return " ".join(words)


def _paise(amount: Decimal) -> int:
    """The amount in paise; ValueError for a negative amount or one with a fraction of a paisa."""
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"Not an amount of money: {amount}.")
    paise = amount * 100
    if paise != paise.to_integral_value():
        raise ValueError(f"{amount} has a fraction of a paisa.")
    return int(paise)


def rupees_in_words(amount: Decimal) -> str:
    """0 -> "Rupees Zero Only"; 0.50 -> "Fifty Paise Only"; 0.01 -> "One Paisa Only"; 120500.50 -> "Rupees
    One Lakh Twenty Thousand Five Hundred and Fifty Paise Only"."""
    rupees, paise = divmod(_paise(amount), 100)
    paise_words = f"{number_in_words(paise)} {'Paisa' if paise == 1 else 'Paise'}"
    if rupees == 0 and paise:
        return f"{paise_words} Only"
    words = f"Rupees {number_in_words(rupees)}"
    return f"{words} and {paise_words} Only" if paise else f"{words} Only"


def indian_figures(amount: Decimal) -> str:
    """Two places, grouped the Indian way: 1234567.5 -> "12,34,567.50"; -1500 -> "-1,500.00"."""
    sign = "-" if amount < 0 else ""
    whole, _, fraction = str(abs(amount).quantize(Decimal("0.01"), ROUND_HALF_UP)).partition(".")
    head, tail = whole[:-3], whole[-3:]
    groups: list[str] = []
    while len(head) > 2:
        head, group = head[:-2], head[-2:]
        groups.insert(0, group)
    if head:
        groups.insert(0, head)
    return sign + ",".join([*groups, tail]) + "." + fraction
