"""The forms of the pharmacist's pages in the admin (pharmacy.admin): receiving stock, dispensing a
prescription with its first-expiry-first-out suggestions, and taking dispensed drugs back.

They only collect input: every rule (expiry after today at the branch, a known batch keeping its expiry and
MRP, the prescription's remaining quantities, stock on hand, what may come back) is the service's, and a
service refusal is put back onto the field it names (`add_service_error`), so staff read it where they typed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.widgets import AutocompleteSelect
from django.db.models import QuerySet

from clinic.errors import DomainError, FieldError
from clinic.models import Branch
from pharmacy.models import MAX_QUANTITY, Batch, DispenseLine, Drug
from pharmacy.selectors import Suggestion
from pharmacy.services import DispenseItem, ReturnItem


def _quantity(**kwargs: Any) -> forms.IntegerField:
    return forms.IntegerField(
        min_value=0, max_value=MAX_QUANTITY, widget=forms.NumberInput(attrs={"size": 6}), **kwargs
    )


class ReceiveStockForm(forms.Form):
    """A receipt as POST /api/v1/pharmacy/stock/receipts takes it; the branch is one of the staff member's."""

    branch = forms.ModelChoiceField(queryset=Branch.objects.none(), empty_label=None)
    # Typed, not scrolled: the admin's autocomplete over the drug list's search (code, generic or brand
    # name). A catalogue of 2,000 drugs as one <select> took 250-480 ms to render on every visit.
    drug = forms.ModelChoiceField(
        queryset=Drug.objects.filter(active=True).order_by("code"),
        widget=AutocompleteSelect(Batch._meta.get_field("drug"), admin.site),
        help_text="Type the drug code or name.",
    )
    batch_number = forms.CharField(max_length=40)
    expiry_date = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"))
    quantity = forms.IntegerField(min_value=1, max_value=MAX_QUANTITY, help_text="Units received.")
    unit_cost = forms.DecimalField(label="Cost price per unit", max_digits=12, decimal_places=2, min_value=0)
    mrp = forms.DecimalField(label="MRP per unit", max_digits=12, decimal_places=2, min_value=0)

    def __init__(self, *args: Any, branches: QuerySet[Branch], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        branch_field = self.fields["branch"]
        assert isinstance(branch_field, forms.ModelChoiceField)
        branch_field.queryset = branches

    def add_service_error(self, exc: DomainError) -> None:
        _onto(self, exc, {name: name for name in self.fields})


def _onto(form: forms.Form, exc: DomainError, fields: Mapping[str, str]) -> None:
    """A service refusal onto `form`: each FieldError key the form has a field for (`fields` maps the
    service's key to it), the rest as errors of the whole form."""
    if not isinstance(exc, FieldError):
        form.add_error(None, exc.detail)
        return
    for key, message in exc.errors.items():
        form.add_error(fields.get(key), message)


class _QuantityForm(forms.Form):
    quantity = _quantity(required=False)

    def units(self) -> int:
        return self.cleaned_data.get("quantity") or 0


class DispenseOptionsForm(forms.Form):
    bill = forms.BooleanField(required=False, label="Add the drugs to the patient's invoice")


class DispensePage:
    """One quantity per prescription item, first filled with what the FEFO suggestion takes (the remaining
    quantity, or what is on hand when less); the service then draws from the same batches in the same order."""

    def __init__(self, suggestions: Sequence[Suggestion], data: Any = None) -> None:
        self.options = DispenseOptionsForm(data)
        self.rows = [
            (suggestion, _QuantityForm(data, prefix=f"item-{index}", initial={"quantity": suggestion.quantity}))
            for index, suggestion in enumerate(suggestions)
        ]
        self._sent: list[_QuantityForm] = []

    @property
    def forms(self) -> list[forms.Form]:
        return [self.options, *(form for _, form in self.rows)]

    def is_valid(self) -> bool:
        return all([form.is_valid() for form in self.forms])  # a list: every form shows its errors

    def items(self) -> list[DispenseItem]:
        """The items with units to hand over (the service refuses an empty dispense with its own words)."""
        chosen = [(suggestion, form) for suggestion, form in self.rows if form.units() > 0]
        self._sent = [form for _, form in chosen]
        return [DispenseItem(drug=suggestion.item.drug, quantity=form.units()) for suggestion, form in chosen]

    @property
    def bill(self) -> bool:
        return bool(self.options.cleaned_data.get("bill"))

    def add_service_error(self, exc: DomainError) -> None:
        if isinstance(exc, FieldError):
            for key, message in exc.errors.items():
                index = _item_index(key, "items")
                target = self._sent[index] if index is not None and index < len(self._sent) else self.options
                target.add_error("quantity" if target is not self.options else None, message)
        else:
            self.options.add_error(None, exc.detail)


def _item_index(key: str, prefix: str) -> int | None:
    """The index of the service's "<prefix>.<index>.<field>" error key."""
    parts = key.split(".")
    if len(parts) == 3 and parts[0] == prefix and parts[1].isdigit():
        return int(parts[1])
    return None


class ReturnReasonForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"size": 60}))


class ReturnPage:
    """One quantity per dispensed line (0: nothing back) and the reason, for dispense_return."""

    def __init__(self, lines: Sequence[DispenseLine], data: Any = None) -> None:
        self.reason = ReturnReasonForm(data)
        self.rows = [(line, _QuantityForm(data, prefix=f"line-{index}")) for index, line in enumerate(lines)]
        self._sent: list[_QuantityForm] = []

    def is_valid(self) -> bool:
        return all([self.reason.is_valid(), *(form.is_valid() for _, form in self.rows)])

    def items(self) -> list[ReturnItem]:
        chosen = [(line, form) for line, form in self.rows if form.units() > 0]
        self._sent = [form for _, form in chosen]
        return [ReturnItem(line_id=line.pk, quantity=form.units()) for line, form in chosen]

    def add_service_error(self, exc: DomainError) -> None:
        if isinstance(exc, FieldError):
            for key, message in exc.errors.items():
                index = _item_index(key, "lines")
                if key == "reason":
                    self.reason.add_error("reason", message)
                elif index is not None and index < len(self._sent):
                    self._sent[index].add_error("quantity", message)
                else:
                    self.reason.add_error(None, message)
            return
        # exceeds_dispensed names its line: the message goes beside that line's quantity.
        by_line = {str(line.pk): form for line, form in self.rows}
        form = by_line.get(str(exc.extra.get("line_id")))
        if form is not None:
            form.add_error("quantity", exc.detail)
        else:
            self.reason.add_error(None, exc.detail)
